package runner

import (
	"math"
	"runtime/debug"
	"testing"
)

// A runner's budget raises the heap's soft limit while it is open, and
// closing gives its share back; with none open there is no limit.
func TestMemoryLimitFollowsRunners(t *testing.T) {
	if debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Skip("a memory limit is set (GOMEMLIMIT, or a runner left open)")
	}
	r := start(t, open(t, ""), options(t))
	b := r.Budget().CPU()
	if got, want := debug.SetMemoryLimit(-1), int64(b+limitHeadroom(b)); got != want || b == 0 || r.Budget().HeapLimit != uint64(want) {
		t.Errorf("limit %d with a runner of %d bytes open (it says %d), want %d", got, b, r.Budget().HeapLimit, want)
	}
	r2 := start(t, open(t, "stories260K-f32.gguf"), options(t))
	b2 := r2.Budget().CPU()
	if got, want := debug.SetMemoryLimit(-1), int64(b+b2+limitHeadroom(b+b2)); got != want {
		t.Errorf("limit %d with two runners open, want %d", got, want)
	}
	r2.Close()
	r.Close()
	r.Close() // twice: given back once
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("limit %d with every runner closed", got)
	}
}
