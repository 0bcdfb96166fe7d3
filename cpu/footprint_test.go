package cpu

import (
	"runtime"
	"testing"

	"dovetail/internal/golden"
	"dovetail/models"
)

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// A sequence's cache and scratch, after a full batch at the end of its
// context, take what MeasureTarget counts (within 5%).
func TestMeasureTargetSequence(t *testing.T) {
	m, err := models.LoadLlama(golden.ModelPath("stories260K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	pool := NewPool(2)
	defer pool.Close()
	const ctx = 512
	f := NewFast(m, DefaultKernels(), pool, ctx)
	want := MeasureTarget(m, ctx, 2)
	before := heapInUse()
	target := NewTargetWith(f)
	toks := make([]int, ctx)
	for i := range toks {
		toks[i] = 1 + i%400
	}
	// In two calls: the last batch of 64 rows sees the whole context.
	if _, err := target.Forward(toks[:ctx-maxBatch]); err != nil {
		t.Fatal(err)
	}
	if _, err := target.Forward(toks[ctx-maxBatch:]); err != nil {
		t.Fatal(err)
	}
	got := heapInUse() - before
	runtime.KeepAlive(target)
	if w := want.KV + want.Scratch; float64(got) < 0.95*float64(w) || float64(got) > 1.05*float64(w) {
		t.Errorf("a sequence took %d bytes, MeasureTarget counts %d (KV %d, scratch %d)", got, w, want.KV, want.Scratch)
	}
	if want.Weights < uint64(m.File.DataOffset) && want.Weights == 0 {
		t.Errorf("weights %d bytes", want.Weights)
	}
}
