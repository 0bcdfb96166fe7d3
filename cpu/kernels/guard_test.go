//go:build linux || darwin

package kernels

import (
	"os"
	"syscall"
	"testing"
)

// guarded returns n bytes that end where an inaccessible page begins, so
// that a kernel reading past the end of its data faults instead of reading
// garbage, as it would past the end of a memory-mapped model file.
func guarded(t testing.TB, n int) []byte {
	ps := os.Getpagesize()
	size := (n + ps - 1) / ps * ps
	mem, err := syscall.Mmap(-1, 0, size+ps, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mprotect(mem[size:], syscall.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Munmap(mem) })
	return mem[size-n : size : size]
}
