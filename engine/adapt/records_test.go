package adapt

import (
	"math/rand/v2"
	"sync"
	"testing"
)

func feat(v float32, n int) []float32 {
	f := make([]float32, n)
	for i := range f {
		f[i] = v
	}
	return f
}

func TestRecordsBoundAndOrder(t *testing.T) {
	const h = 4
	r, err := NewRecords(h, 10*RecordBytes(h))
	if err != nil {
		t.Fatal(err)
	}
	// Two sequences, 14 positions: the ring keeps the newest 10.
	for i := 0; i < 7; i++ {
		r.Append(1, []int{i}, [][]float32{feat(float32(i), h)})
	}
	for i := 100; i < 107; i++ {
		r.Append(2, []int{i}, [][]float32{feat(float32(i), h)})
	}
	if r.Len() != 10 || r.Total() != 14 || r.Bytes() != 10*RecordBytes(h) {
		t.Fatalf("len %d total %d bytes %d", r.Len(), r.Total(), r.Bytes())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ws := r.Sample(rng, 200, 3, false)
	if len(ws) == 0 {
		t.Fatal("no windows")
	}
	for _, w := range ws {
		for i := 1; i < len(w.Tokens); i++ {
			// Consecutive positions of one sequence: tokens count up by one.
			if w.Tokens[i] != w.Tokens[i-1]+1 {
				t.Fatalf("window %v crosses a sequence or is out of order", w.Tokens)
			}
			if w.Features[i][0] != float32(w.Tokens[i]) {
				t.Fatalf("feature %v for token %d", w.Features[i], w.Tokens[i])
			}
		}
		if w.Tokens[0] < 3 {
			t.Fatalf("window %v holds an evicted position", w.Tokens)
		}
	}
	if ws := r.Sample(rng, 1, 11, false); ws != nil {
		t.Error("a window longer than the ring")
	}
	if _, err := NewRecords(h, RecordBytes(h)); err == nil {
		t.Error("a ring of one position accepted")
	}
}

// One writer and one reader at once: go test -race checks the locking.
func TestRecordsConcurrent(t *testing.T) {
	r, _ := NewRecords(8, 1000*RecordBytes(8))
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < 5000; i++ {
			r.Append(uint64(i/50), []int{i}, [][]float32{feat(1, 8)})
		}
	}()
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(3, 4))
		for i := 0; i < 500; i++ {
			r.Sample(rng, 4, 16, true)
		}
	}()
	wg.Wait()
	if r.Len() != 1000 {
		t.Errorf("len %d", r.Len())
	}
}

func TestControl(t *testing.T) {
	c := DefaultControl()
	c.Patience = 2
	for i := 0; i < 300; i++ {
		c.Observe(4)
	}
	c.Evaluated(false)
	c.Evaluated(false)
	if c.Collecting() {
		t.Fatal("still collecting after two failed evaluations")
	}
	// Steady τ: stays off.
	for i := 0; i < 100; i++ {
		if c.Observe(4) {
			t.Fatal("collection restarted without a drop")
		}
	}
	// A domain shift: τ drops, collection restarts within a few rounds.
	on := -1
	for i := 0; i < 50 && on < 0; i++ {
		if c.Observe(2) {
			on = i
		}
	}
	if on < 0 || on > 10 {
		t.Errorf("collection restarted after %d rounds of a drop", on)
	}
	if !c.ShouldTrain(c.MinRecords) || c.ShouldTrain(c.MinRecords-1) {
		t.Error("ShouldTrain ignores MinRecords")
	}
}

// HoldOut keeps whole newest sequences apart, at least min positions of
// them, and splits inside when there is only one sequence.
func TestRecordsHoldOut(t *testing.T) {
	r, err := NewRecords(4, 100*RecordBytes(4))
	if err != nil {
		t.Fatal(err)
	}
	add := func(seq uint64, n int) {
		toks, feats := make([]int, n), make([][]float32, n)
		for i := range feats {
			feats[i] = feat(float32(seq), 4)
		}
		r.Append(seq, toks, feats)
	}
	add(1, 10)
	if got := r.HoldOut(4); got != 6 {
		t.Errorf("one sequence: split at %d, want 6", got)
	}
	add(2, 5)
	add(3, 7)
	for _, tc := range []struct{ min, want int }{{1, 15}, {7, 15}, {8, 10}, {12, 10}, {13, 9}} {
		if got := r.HoldOut(tc.min); got != tc.want {
			t.Errorf("HoldOut(%d) = %d, want %d", tc.min, got, tc.want)
		}
	}
}
