// Package probe says what this machine has for running models: the CPU
// and which kernels run on it, the memory and its bandwidth, and each
// NVIDIA GPU with its memory and link; and, in words, what is missing and
// what follows from it.
package probe

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"

	"dovetail/cpu"
	"dovetail/device/cuda"
	"dovetail/internal/sysmem"
)

// Report is what the probe found.
type Report struct {
	CPU    CPU    `json:"cpu"`
	Memory Memory `json:"memory"`
	GPUs   []GPU  `json:"gpus"`
	// Driver is the NVIDIA driver's CUDA version ("" without one).
	Driver string `json:"cuda_driver,omitempty"`
	// Findings say what is missing or limited, and what follows.
	Findings []Finding `json:"findings"`
}

// CPU is the processor and the kernels that run on it.
type CPU struct {
	Model   string   `json:"model"`
	Vendor  string   `json:"vendor"`
	ISA     []string `json:"isa"`     // the instruction sets the kernels care about
	Kernels string   `json:"kernels"` // the level that runs
	Cores   int      `json:"cores"`   // physical
	Threads int      `json:"threads"` // logical
	L1D     int      `json:"l1d_bytes"`
	L2      int      `json:"l2_bytes"`
	L3      int      `json:"l3_bytes"`
}

// Memory is the host memory.
type Memory struct {
	TotalBytes     uint64 `json:"total_bytes"`
	AvailableBytes uint64 `json:"available_bytes"`
	// Limited: a cgroup (a container) limits it below the machine's.
	Limited bool `json:"limited"`
	// ByThreads is the bandwidth at 1, 2, … threads (STREAM copy
	// counting), each the median of bandwidthPasses short passes, and
	// BandwidthGBs the highest of them.
	BandwidthGBs float64   `json:"bandwidth_gb_s"`
	ByThreads    []float64 `json:"bandwidth_by_threads_gb_s,omitempty"`
}

// GPU is one NVIDIA GPU.
type GPU struct {
	Name              string  `json:"name"`
	ComputeCapability string  `json:"compute_capability"`
	VRAMTotalBytes    uint64  `json:"vram_total_bytes"`
	VRAMFreeBytes     uint64  `json:"vram_free_bytes"`
	PCIBusID          string  `json:"pci_bus_id"`
	PCIeGen           int     `json:"pcie_gen"`
	PCIeWidth         int     `json:"pcie_width"`
	PCIeMaxGen        int     `json:"pcie_max_gen"`
	PCIeMaxWidth      int     `json:"pcie_max_width"`
	H2DGBs            float64 `json:"h2d_gb_s"`
	D2HGBs            float64 `json:"d2h_gb_s"`
	LatencyUs         float64 `json:"copy_latency_us"`
	// MemoryBandwidthGBs is the card's peak memory bandwidth, GB/s:
	// reckoned from the driver's memory clock and bus width
	// (MemoryBandwidth), or for a card planned for, assumed.
	MemoryBandwidthGBs float64 `json:"memory_bandwidth_gb_s"`
	MemoryClockKHz     int     `json:"memory_clock_khz,omitempty"`
	MemoryBusBits      int     `json:"memory_bus_bits,omitempty"`
}

// Finding is something missing or limited, and what follows from it.
type Finding struct {
	What        string `json:"what"`
	Consequence string `json:"consequence"`
}

func (f Finding) String() string { return f.What + ": " + f.Consequence }

// Options say how much to measure.
type Options struct {
	// Measure times the memory bandwidth at each thread count and the
	// GPUs' copies (seconds); without it only what is read is reported.
	Measure bool
	// Root is where /proc and /sys are read ("" or "/": this machine's).
	Root string
	// Progress, when set, is told each step as it starts, and once more
	// when all are done.
	Progress func(Step)
}

// Step is where the probe stands: it is measuring What, Done of Total
// steps done. The last call has Done == Total and no What.
type Step struct {
	What        string
	Done, Total int
}

// bandwidthPasses is how many passes each thread count's bandwidth is the
// median of: the best of three read 18.5, 38.2 and 28.6 GB/s on three runs
// of one machine, a pass served from cache or slowed by a neighbour
// deciding it.
const bandwidthPasses = 7

// Run probes this machine.
func Run(o Options) Report {
	if o.Root == "" {
		o.Root = "/"
	}
	if o.Progress == nil {
		o.Progress = func(Step) {}
	}
	var r Report
	r.CPU = probeCPU()
	if info, err := sysmem.ReadFrom(o.Root); err == nil {
		r.Memory = Memory{TotalBytes: info.Total, AvailableBytes: info.Available, Limited: info.Limited}
	}
	// The steps: each thread count's bandwidth when measuring, the GPUs.
	total := 1
	if o.Measure {
		total += r.CPU.Threads
	}
	done := 0
	step := func(what string) {
		o.Progress(Step{What: what, Done: done, Total: total})
		done++
	}
	if o.Measure {
		for n := 1; n <= r.CPU.Threads; n++ {
			step(fmt.Sprintf("the memory bandwidth with %d of %d threads", n, r.CPU.Threads))
			bw := median(cpu.BandwidthPasses(n, bandwidthPasses))
			r.Memory.ByThreads = append(r.Memory.ByThreads, bw)
			r.Memory.BandwidthGBs = max(r.Memory.BandwidthGBs, bw)
		}
	}
	step("the GPUs")
	version, gpus, err := cuda.Probe(o.Measure)
	if version > 0 {
		r.Driver = fmt.Sprintf("%d.%d", version/1000, version%1000/10)
	}
	r.GPUs = []GPU{}
	for _, g := range gpus {
		r.GPUs = append(r.GPUs, fromInfo(g, o.Root))
	}
	r.Findings = findings(r, err)
	o.Progress(Step{Done: total, Total: total})
	return r
}

// median is the middle of xs (the mean of the middle two for an even
// count); xs is sorted in place.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}

func fromInfo(g cuda.Info, root string) GPU {
	out := GPU{Name: g.Name, ComputeCapability: fmt.Sprintf("%d.%d", g.ComputeMajor, g.ComputeMinor),
		VRAMTotalBytes: g.TotalBytes, VRAMFreeBytes: g.FreeBytes, PCIBusID: g.PCIBusID,
		H2DGBs: g.H2DGBs, D2HGBs: g.D2HGBs, LatencyUs: float64(g.Latency.Nanoseconds()) / 1e3,
		MemoryClockKHz: g.MemoryClockKHz, MemoryBusBits: g.MemoryBusBits, MemoryBandwidthGBs: MemoryBandwidth(g.MemoryClockKHz, g.MemoryBusBits) / 1e9}
	l := readLink(root, g.PCIBusID)
	out.PCIeGen, out.PCIeWidth, out.PCIeMaxGen, out.PCIeMaxWidth = l.gen, l.width, l.maxGen, l.maxWidth
	return out
}

// noGPU says why there is no GPU to draft on.
func noGPU(err error) Finding {
	consequence := "the draft runs on the CPU, beside the target"
	switch {
	case err == nil:
		return Finding{"no NVIDIA GPU", consequence}
	case errors.Is(err, cuda.ErrNoDevice) && strings.Contains(err.Error(), "libcuda.so.1 not found"):
		return Finding{"no NVIDIA driver (libcuda.so.1 not found)", consequence}
	case errors.Is(err, cuda.ErrNoDevice):
		return Finding{"no NVIDIA GPU (" + strings.TrimPrefix(err.Error(), cuda.ErrNoDevice.Error()+": ") + ")", consequence}
	}
	return Finding{"the NVIDIA GPU did not answer (" + err.Error() + ")", consequence}
}

// threads is what runtime says when cpuid does not.
func threads(n int) int {
	if n > 0 {
		return n
	}
	return runtime.NumCPU()
}
