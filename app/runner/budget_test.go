package runner

import (
	"math"
	"strings"
	"testing"
)

// Sizes too large to count saturate: a budget whose parts add past 2^64
// does not wrap round to a small one that fits, and says so in words.
func TestBudgetNeverWraps(t *testing.T) {
	huge := uint64(1) << 62
	b := Budget{Available: 1 << 30}
	b.add("weights", "cpu", 1<<20)
	b.add("kv cache", "cpu", satMul(64, huge)) // 2^68
	b.add("scratch", "cpu", 3*huge)
	if b.CPU() != math.MaxUint64 || b.fits() {
		t.Errorf("CPU %d, fits %v", b.CPU(), b.fits())
	}
	if got := HumanBytes(b.part("kv cache")); got != "more than 16 EiB" {
		t.Errorf("kv cache shown as %q", got)
	}
	if satAdd(3, 4) != 7 || satMul(1<<31, 1<<31) != 1<<62 || satAdd(math.MaxUint64, 1) != math.MaxUint64 {
		t.Error("saturating arithmetic wrong on sizes that fit")
	}
	e := &MemoryError{Budget: b, Hint: "choose less", Cause: "the cache is too big"}
	if msg := e.Error(); !strings.HasPrefix(msg, "not enough memory: the cache is too big, and 1.0 GiB is available; choose less") {
		t.Errorf("%q", msg)
	}
}
