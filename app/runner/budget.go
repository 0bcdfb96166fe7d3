package runner

import (
	"fmt"
	"strings"
)

// Part is one thing the memory budget counts.
type Part struct {
	Name   string `json:"name"`   // weights, kv cache, scratch, draft, trainer, adaptation, draft model
	Device string `json:"device"` // cpu, or the GPU's name
	Bytes  uint64 `json:"bytes"`
}

// Budget is the memory a runner's placement takes, part by part, against
// what the machine had available when it was made.
type Budget struct {
	Parts []Part `json:"parts"`
	// Available is the RAM new allocations could get (MemAvailable, under
	// a cgroup's limit); 0 when unknown.
	Available uint64 `json:"available_bytes"`
	// GPUFree is the chosen GPU's free memory before the draft was
	// placed there; 0 without one.
	GPUFree uint64 `json:"gpu_free_bytes,omitempty"`
	// HeapLimit is the Go heap's soft limit the runner set as it opened
	// (heaplimit.go); 0 when GOMEMLIMIT stands.
	HeapLimit uint64 `json:"heap_limit_bytes,omitempty"`
}

// CPU is the bytes of the parts in host memory.
func (b Budget) CPU() uint64 { return b.sum(func(p Part) bool { return p.Device == "cpu" }) }

// GPU is the bytes of the parts on a GPU.
func (b Budget) GPU() uint64 { return b.sum(func(p Part) bool { return p.Device != "cpu" }) }

func (b Budget) sum(keep func(Part) bool) uint64 {
	var n uint64
	for _, p := range b.Parts {
		if keep(p) {
			n += p.Bytes
		}
	}
	return n
}

func (b *Budget) add(name, device string, bytes uint64) {
	if bytes > 0 {
		b.Parts = append(b.Parts, Part{Name: name, Device: device, Bytes: bytes})
	}
}

// takeWeights takes n bytes off the CPU's weights: what went to a GPU.
func (b *Budget) takeWeights(n uint64) {
	for i, p := range b.Parts {
		if p.Name == "weights" && p.Device == "cpu" {
			b.Parts[i].Bytes -= min(n, p.Bytes)
		}
	}
}

// fits reports whether the host parts fit in the memory available.
func (b Budget) fits() bool { return b.Available == 0 || b.CPU() <= b.Available }

// String lists the parts, as an error or a report shows them.
func (b Budget) String() string {
	var s []string
	for _, p := range b.Parts {
		where := ""
		if p.Device != "cpu" {
			where = " on " + p.Device
		}
		s = append(s, fmt.Sprintf("%s %s%s", p.Name, HumanBytes(p.Bytes), where))
	}
	return strings.Join(s, ", ")
}

// MemoryError says the placement does not fit in memory.
type MemoryError struct {
	Budget Budget
	Hint   string
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("not enough memory: this needs %s (%s) and %s is available; %s",
		HumanBytes(e.Budget.CPU()), e.Budget, HumanBytes(e.Budget.Available), e.Hint)
}

// HumanBytes writes a size in binary units: 591.2 MiB.
func HumanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
