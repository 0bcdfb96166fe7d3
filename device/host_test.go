package device

import "testing"

// The host device counts what it holds: buffers until freed (views are
// not extra memory), and reports the machine's memory.
func TestHostHeld(t *testing.T) {
	h := newHost[float32](HostConfig{Threads: 1})
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
