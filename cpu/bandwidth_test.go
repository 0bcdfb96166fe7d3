package cpu

import (
	"testing"
	"unsafe"
)

// The roofline's read covers every matrix decode multiplies, where decode
// reads it (the packed copy, when there is one), split among any number
// of threads without a line read twice or left out.
func TestMeasureWeightRead(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	f := NewFast(loadTest(t, "tinystories656K-Q8_0.gguf"), DefaultKernels(), pool, 0)
	mem, ts := f.decodeMemory(), f.decodeMatrices()
	if len(ts) != 1+7*len(f.M.Layers) || len(mem) != len(ts) {
		t.Fatalf("%d matrices, %d buffers, for %d layers", len(ts), len(mem), len(f.M.Layers))
	}
	var lines int64
	packed := 0
	for i, m := range ts {
		want := m.Data
		if p := f.packed[m]; p != nil {
			want = p.Memory()
			packed++
		}
		if len(mem[i]) != len(want) || unsafe.SliceData(mem[i]) != unsafe.SliceData(want) {
			t.Errorf("%s: reads %d bytes elsewhere than the %d decode reads", m.Name, len(mem[i]), len(want))
		}
		lines += int64(len(want) / 64)
	}
	if f.K.PackRows > 0 && packed == 0 {
		t.Errorf("no packed matrix read at the %s level", f.K.Name)
	}
	for _, threads := range []int{1, 3} {
		gbs, bytes := f.MeasureWeightRead(threads, 2)
		if bytes != 64*lines || !(gbs > 0) {
			t.Errorf("%d threads: %d bytes read at %.1f GB/s, want %d", threads, bytes, gbs, 64*lines)
		}
	}
}
