//go:build unix

package mapfile

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

const mapped = true

// Map maps size bytes of fd read-only; release unmaps them.
func Map(fd *os.File, size int64) (b []byte, release func() error, err error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	if int64(int(size)) != size {
		return nil, nil, fmt.Errorf("%s: file too large to map", fd.Name())
	}
	b, err = syscall.Mmap(int(fd.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", fd.Name(), err)
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}

// Evict drops the whole pages inside b, a slice of a mapping, from this
// process's memory (madvise MADV_DONTNEED on a read-only shared file
// mapping): touching them again reads them back from the file.
func Evict(b []byte) {
	page := uintptr(syscall.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	lo, hi := (start+page-1)&^(page-1), (start+uintptr(len(b)))&^(page-1)
	if hi <= lo {
		return
	}
	unix.Madvise(b[lo-start:hi-start], unix.MADV_DONTNEED)
}
