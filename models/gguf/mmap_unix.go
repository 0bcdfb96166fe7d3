//go:build unix

package gguf

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

const canEvict = true

func mapFile(fd *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	if int64(int(size)) != size {
		return nil, nil, &Error{File: fd.Name(), Msg: "file too large to map"}
	}
	b, err := syscall.Mmap(int(fd.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}

// evict drops the whole pages inside b from this process's memory
// (madvise MADV_DONTNEED on a read-only shared file mapping): touching them
// again reads them back from the file.
func evict(b []byte) {
	page := uintptr(syscall.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo, hi := (start+page-1)&^(page-1), (start+uintptr(len(b)))&^(page-1)
	if hi <= lo {
		return
	}
	unix.Madvise(b[lo-start:hi-start], unix.MADV_DONTNEED)
}
