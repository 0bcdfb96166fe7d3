package runner

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"

	"dovetail/internal/sizes"
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
			n = satAdd(n, p.Bytes)
		}
	}
	return n
}

// satAdd and satMul are a+b and a·b, or the largest uint64 where that
// overflows: a size too large to count still never fits, and never wraps
// round to one that does.
func satAdd(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}

func satMul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

// part is the bytes of the part called name (0 without one).
func (b Budget) part(name string) uint64 {
	return b.sum(func(p Part) bool { return p.Name == name })
}

// gpuPart is the bytes of the part called name on a GPU (0 without one).
func (b Budget) gpuPart(name string) uint64 {
	return b.sum(func(p Part) bool { return p.Name == name && p.Device != "cpu" })
}

func (b *Budget) add(name, device string, bytes uint64) {
	if bytes > 0 {
		b.Parts = append(b.Parts, Part{Name: name, Device: device, Bytes: bytes})
	}
}

// take takes n bytes off the CPU's part called name (weights, kv cache):
// what went to a GPU.
func (b *Budget) take(name string, n uint64) {
	for i, p := range b.Parts {
		if p.Name == name && p.Device == "cpu" {
			b.Parts[i].Bytes -= min(n, p.Bytes)
		}
	}
}

// giveBack adds n bytes back to the CPU's part called name (weights, kv
// cache): what a GPU took and gave back.
func (b *Budget) giveBack(name string, n uint64) {
	for i, p := range b.Parts {
		if p.Name == name && p.Device == "cpu" {
			b.Parts[i].Bytes += n
		}
	}
}

// drop removes the part called name on device.
func (b *Budget) drop(name, device string) {
	b.Parts = slices.DeleteFunc(b.Parts, func(p Part) bool { return p.Name == name && p.Device == device })
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
	// Cause, when set, is the one part that alone does not fit, in
	// words; the message then names it instead of listing every part.
	Cause string
}

func (e *MemoryError) Error() string {
	if e.Cause != "" {
		return fmt.Sprintf("not enough memory: %s, and %s is available; %s", e.Cause, HumanBytes(e.Budget.Available), e.Hint)
	}
	return fmt.Sprintf("not enough memory: this needs %s (%s) and %s is available; %s",
		HumanBytes(e.Budget.CPU()), e.Budget, HumanBytes(e.Budget.Available), e.Hint)
}

// HumanBytes writes a size in binary units: 591.2 MiB (sizes.Bytes).
func HumanBytes(n uint64) string { return sizes.Bytes(n) }
