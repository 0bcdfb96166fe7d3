package probe

import (
	"runtime"

	"github.com/klauspost/cpuid/v2"

	"dovetail/cpu/kernels"
)

// isaFeatures are the instruction sets the kernel levels depend on, in
// the order they are listed.
var isaFeatures = []struct {
	name string
	id   cpuid.FeatureID
}{
	{"SSE4.2", cpuid.SSE42}, {"AVX", cpuid.AVX}, {"AVX2", cpuid.AVX2}, {"FMA", cpuid.FMA3}, {"F16C", cpuid.F16C},
	{"AVX-512F", cpuid.AVX512F}, {"AVX-512BW", cpuid.AVX512BW}, {"AVX-512VL", cpuid.AVX512VL},
	{"AVX-512 VNNI", cpuid.AVX512VNNI}, {"AVX-VNNI", cpuid.AVXVNNI}, {"AVX-512 BF16", cpuid.AVX512BF16},
	{"AMX-TILE", cpuid.AMXTILE}, {"AMX-INT8", cpuid.AMXINT8},
	{"NEON", cpuid.ASIMD}, {"DOTPROD", cpuid.ASIMDDP},
}

func probeCPU() CPU {
	c := cpuid.CPU
	out := CPU{Model: c.BrandName, Vendor: c.VendorString, Cores: c.PhysicalCores, Threads: threads(c.LogicalCores),
		L1D: c.Cache.L1D, L2: c.Cache.L2, L3: c.Cache.L3, ISA: []string{}}
	if out.Cores <= 0 {
		out.Cores = out.Threads
	}
	if out.Model == "" {
		out.Model = runtime.GOARCH + " CPU"
	}
	for _, f := range isaFeatures {
		if c.Supports(f.id) {
			out.ISA = append(out.ISA, f.name)
		}
	}
	if k, err := kernels.Best(); err == nil {
		out.Kernels = k.Name
	} else {
		out.Kernels = "none: " + err.Error()
	}
	return out
}
