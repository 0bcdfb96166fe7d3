package probe

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
)

// lowVRAM is the free GPU memory below which a draft of a 1B-class target
// and its trainer will not fit.
const lowVRAM = 1 << 30

// findings says what is missing or limited in r, and what follows; gpuErr
// is why no GPU answered.
func findings(r Report, gpuErr error) []Finding {
	fs := []Finding{}
	has := func(isa string) bool { return slices.Contains(r.CPU.ISA, isa) }
	k := r.CPU.Kernels
	switch {
	case strings.HasPrefix(k, "none"):
		fs = append(fs, Finding{"the CPU kernels cannot run (" + k + ")", "nothing can run until that is fixed"})
	case k == "go":
		fs = append(fs, Finding{"no SIMD kernels in this build", "everything runs in pure Go, several times slower: build with make"})
	case runtime.GOARCH == "amd64" && !has("AVX2"):
		fs = append(fs, Finding{"no AVX2", "the generic kernels run, several times slower than on a CPU with AVX2"})
	case runtime.GOARCH == "amd64" && !has("AVX-512F"):
		run := "the AVX2 kernels run"
		if k == "avxvnni" {
			run += ", with AVX-VNNI"
		}
		fs = append(fs, Finding{"no AVX-512", run})
	case runtime.GOARCH == "amd64" && !has("AVX-512 VNNI"):
		fs = append(fs, Finding{"AVX-512 without VNNI", "the AVX2 kernels run"})
	}
	if r.Memory.Limited {
		fs = append(fs, Finding{fmt.Sprintf("memory limited to %s by a cgroup (a container)", gib(r.Memory.TotalBytes)),
			"models and their caches must fit in that, not in the machine's memory"})
	}
	if len(r.GPUs) == 0 {
		fs = append(fs, noGPU(gpuErr))
	}
	for _, g := range r.GPUs {
		if g.VRAMFreeBytes < lowVRAM {
			fs = append(fs, Finding{fmt.Sprintf("%s has %s free of %s", g.Name, gib(g.VRAMFreeBytes), gib(g.VRAMTotalBytes)),
				"a draft that does not fit there runs on the CPU"})
		}
		if g.PCIeWidth > 0 && g.PCIeMaxWidth > g.PCIeWidth || g.PCIeGen > 0 && g.PCIeMaxGen > g.PCIeGen {
			fs = append(fs, Finding{fmt.Sprintf("%s runs its PCIe link at gen %d x%d of gen %d x%d", g.Name, g.PCIeGen, g.PCIeWidth, g.PCIeMaxGen, g.PCIeMaxWidth),
				"copies between CPU and GPU are slower (an idle GPU may lower its link until it works)"})
		}
	}
	return fs
}

func gib(n uint64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }
