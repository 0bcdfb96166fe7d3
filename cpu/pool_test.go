package cpu

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestPoolFor(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	for _, n := range []int{0, 1, 2, 3, 10, 1000} {
		var seen = make([]atomic.Int32, n)
		chunks := make([]atomic.Int32, p.Threads())
		p.ForChunks(n, func(ch, lo, hi int) {
			chunks[ch].Add(1)
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("n=%d: index %d visited %d times", n, i, seen[i].Load())
			}
		}
		for c := range chunks {
			if chunks[c].Load() > 1 {
				t.Fatalf("n=%d: chunk %d ran %d times", n, c, chunks[c].Load())
			}
		}
	}
}

// BenchmarkPoolFor is the cost of one parallel loop with almost no work:
// the hand-off and the wait, which a decode step pays about a hundred
// times.
//
//	go test -run '^$' -bench PoolFor ./cpu/
func BenchmarkPoolFor(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	var sink atomic.Int64
	for b.Loop() {
		p.For(2, func(lo, hi int) { sink.Add(int64(hi - lo)) })
	}
}

func TestPoolForDynamic(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	for _, c := range []struct{ n, grain int }{{0, 1}, {1, 1}, {5, 0}, {10, 3}, {1000, 7}, {7, 100}} {
		seen := make([]atomic.Int32, c.n)
		p.ForDynamic(c.n, c.grain, func(lo, hi int) {
			if hi-lo > max(c.grain, 1) || hi <= lo {
				t.Errorf("n=%d grain=%d: piece [%d, %d)", c.n, c.grain, lo, hi)
			}
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			if seen[i].Load() != 1 {
				t.Fatalf("n=%d grain=%d: index %d visited %d times", c.n, c.grain, i, seen[i].Load())
			}
		}
	}
}

// BenchmarkPoolForGaps is BenchmarkPoolFor with 20 µs of the caller's own
// work between loops, as a forward pass has (norms, quantizing, attention
// set-up): the workers' wake-up cost shows here.
func BenchmarkPoolForGaps(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	var sink atomic.Int64
	for b.Loop() {
		p.For(2, func(lo, hi int) { sink.Add(int64(hi - lo)) })
		busy(20 * time.Microsecond)
	}
}

func busy(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}
