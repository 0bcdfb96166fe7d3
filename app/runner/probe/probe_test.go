package probe

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"dovetail/device/cuda"
)

func TestPCIeGen(t *testing.T) {
	for s, want := range map[string]int{"2.5 GT/s PCIe": 1, "5.0 GT/s": 2, "8.0 GT/s PCIe": 3, "16.0 GT/s PCIe": 4,
		"32.0 GT/s PCIe": 5, "64.0 GT/s PCIe": 6, "Unknown": 0, "": 0} {
		if got := pcieGen(s); got != want {
			t.Errorf("pcieGen(%q) = %d, want %d", s, got, want)
		}
	}
}

// A recorded machine's sysfs: a gen-4 GPU on 8 of its 16 lanes (the bus
// id as the driver writes it, in upper case).
func TestReadLink(t *testing.T) {
	l := readLink("testdata/gpu-machine", "0000:01:00.0")
	if l != (link{gen: 4, width: 8, maxGen: 4, maxWidth: 16}) {
		t.Errorf("link %+v", l)
	}
	g := fromInfo(cuda.Info{Name: "NVIDIA GeForce RTX 3060", ComputeMajor: 8, ComputeMinor: 6, TotalBytes: 12 << 30,
		FreeBytes: 11 << 30, PCIBusID: "0000:01:00.0"}, "testdata/gpu-machine")
	if g.ComputeCapability != "8.6" || g.PCIeGen != 4 || g.PCIeWidth != 8 || g.PCIeMaxWidth != 16 {
		t.Errorf("GPU %+v", g)
	}
	if l := readLink("testdata/gpu-machine", "0000:02:00.0"); l != (link{}) {
		t.Errorf("a device sysfs does not have: %+v", l)
	}
}

func findingsText(fs []Finding) string {
	var s []string
	for _, f := range fs {
		s = append(s, f.String())
	}
	return strings.Join(s, "\n")
}

// What is missing is said with what follows from it.
func TestFindings(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the x86 kernel levels")
	}
	avx2 := []string{"SSE4.2", "AVX", "AVX2", "FMA", "F16C"}
	avx512 := append(avx2, "AVX-512F", "AVX-512BW", "AVX-512VL", "AVX-512 VNNI")
	gpu3060 := GPU{Name: "RTX 3060", VRAMTotalBytes: 12 << 30, VRAMFreeBytes: 11 << 30, PCIeGen: 4, PCIeWidth: 16, PCIeMaxGen: 4, PCIeMaxWidth: 16}
	for _, c := range []struct {
		name string
		r    Report
		err  error
		want []string // each in the findings
		not  []string
	}{
		{"an old CPU without a GPU driver", Report{CPU: CPU{ISA: []string{"SSE4.2", "AVX"}, Kernels: "generic"}},
			fmt.Errorf("%w: libcuda.so.1 not found", cuda.ErrNoDevice), []string{"no AVX2: the generic kernels run", "driver", "the draft runs on the CPU"}, nil},
		{"AVX2 and a GPU", Report{CPU: CPU{ISA: avx2, Kernels: "avx2"}, GPUs: []GPU{gpu3060}}, nil,
			[]string{"no AVX-512: the AVX2 kernels run"}, []string{"draft runs on the CPU", "PCIe"}},
		{"AVX2 with AVX-VNNI", Report{CPU: CPU{ISA: avx2, Kernels: "avxvnni"}, GPUs: []GPU{gpu3060}}, nil,
			[]string{"no AVX-512: the AVX2 kernels run, with AVX-VNNI"}, []string{"draft runs on the CPU"}},
		{"AVX-512, a busy GPU on a narrow link, a container", Report{CPU: CPU{ISA: avx512, Kernels: "avx512"},
			Memory: Memory{TotalBytes: 8 << 30, Limited: true},
			GPUs:   []GPU{{Name: "GTX 1650", VRAMTotalBytes: 4 << 30, VRAMFreeBytes: 512 << 20, PCIeGen: 3, PCIeWidth: 4, PCIeMaxGen: 3, PCIeMaxWidth: 16}}}, nil,
			[]string{"limited to 8.0 GiB by a cgroup", "GTX 1650 has 0.5 GiB free of 4.0 GiB: a draft that does not fit there runs on the CPU", "gen 3 x4 of gen 3 x16"},
			[]string{"AVX"}},
		{"no SIMD build", Report{CPU: CPU{ISA: avx512, Kernels: "go"}, GPUs: []GPU{gpu3060}}, nil,
			[]string{"no SIMD kernels in this build", "make"}, nil},
	} {
		got := findingsText(findings(c.r, c.err))
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: findings lack %q:\n%s", c.name, w, got)
			}
		}
		for _, w := range c.not {
			if strings.Contains(got, w) {
				t.Errorf("%s: findings say %q:\n%s", c.name, w, got)
			}
		}
	}
}

// On this machine, without measuring: the CPU, its threads and kernels,
// the memory, and what the GPU probe found.
func TestRunHere(t *testing.T) {
	r := Run(Options{})
	if r.CPU.Model == "" || r.CPU.Threads != runtime.NumCPU() || r.CPU.Kernels == "" || r.Memory.TotalBytes == 0 || r.GPUs == nil {
		t.Errorf("report %+v", r)
	}
	if len(r.GPUs) == 0 && !strings.Contains(findingsText(r.Findings), "the draft runs on the CPU") {
		t.Errorf("no GPU, and the findings do not say so: %v", r.Findings)
	}
	if r.Memory.BandwidthGBs != 0 {
		t.Error("bandwidth measured without Measure")
	}
}

// A recorded machine's /proc: the memory the probe reports is its.
func TestRunRecorded(t *testing.T) {
	r := Run(Options{Root: "testdata/gpu-machine"})
	if r.Memory.TotalBytes != 32768000*1024 || r.Memory.AvailableBytes != 20000000*1024 || r.Memory.Limited {
		t.Errorf("memory %+v", r.Memory)
	}
}

// The progress counts the steps really done: each thread count's
// bandwidth and the GPUs, from none to all, in order; the bandwidth is a
// median of passes, one per thread count.
func TestRunProgress(t *testing.T) {
	for _, measure := range []bool{false, true} {
		var steps []Step
		r := Run(Options{Measure: measure, Progress: func(s Step) { steps = append(steps, s) }})
		total := 1
		if measure {
			total += r.CPU.Threads
		}
		if len(steps) != total+1 {
			t.Fatalf("measure %v: %d progress calls for %d steps: %+v", measure, len(steps), total, steps)
		}
		for i, s := range steps {
			if s.Done != i || s.Total != total || (s.What == "") != (i == total) {
				t.Errorf("measure %v: call %d is %+v", measure, i, s)
			}
		}
		if measure && (len(r.Memory.ByThreads) != r.CPU.Threads || r.Memory.BandwidthGBs <= 0) {
			t.Errorf("bandwidth %+v", r.Memory)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{38.2, 18.5, 28.6}, 28.6}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.xs); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.xs, got, c.want)
		}
	}
}
