package gpu

import (
	"testing"
)

// The host device counts what it holds: buffers until freed (views are
// not extra memory), and reports the machine's memory.
func TestHostHeld(t *testing.T) {
	h := newHost[float32](1)
	a := h.Alloc(1000)
	b := h.Alloc(24)
	v := h.View(a, 10, 100)
	if got := h.Held(); got != 4*1024 {
		t.Fatalf("held %d bytes after two buffers of 1000 and 24 floats", got)
	}
	h.Free(v) // a view: frees nothing
	h.Free(a)
	h.Free(a) // twice: counted once
	if got := h.Held(); got != 4*24 {
		t.Fatalf("held %d bytes after freeing 1000 floats", got)
	}
	h.Free(b)
	if free, total := h.MemInfo(); total > 0 && (free == 0 || free > total) {
		t.Errorf("MemInfo: free %d of %d", free, total)
	}
	h.Close()
}

// A CUDA device reports memory that its buffers take, and Close gives back
// its stream, handle and pinned memory: opening and closing many devices
// leaves the GPU's free memory where it was.
func TestCUDAClose(t *testing.T) {
	cudaOrSkip(t)
	d0, err := NewCUDA(0)
	if err != nil {
		t.Fatal(err)
	}
	free0, total := d0.MemInfo()
	d0.Close()
	if free0 == 0 || free0 > total {
		t.Fatalf("MemInfo: free %d of %d", free0, total)
	}
	for range 20 {
		d, err := NewCUDA(0)
		if err != nil {
			t.Fatal(err)
		}
		b := d.Alloc(1 << 24) // 64 MiB
		if free, _ := d.MemInfo(); free > free0-(60<<20) {
			t.Errorf("64 MiB allocated, free memory %d MiB of %d before", free>>20, free0>>20)
		}
		d.Upload(b, []float32{1, 2, 3})
		d.Free(b)
		d.Close()
		d.Close()
	}
	d, err := NewCUDA(0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if free, _ := d.MemInfo(); free+(64<<20) < free0 {
		t.Errorf("after 20 devices opened and closed: %d MiB free, %d before", free>>20, free0>>20)
	}
}
