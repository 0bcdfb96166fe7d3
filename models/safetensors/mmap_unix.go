//go:build unix

package safetensors

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps the file read-only: a checkpoint's tensors are read once
// (converted or copied by the loader), so only the pages touched are
// resident, and the OS may drop them again.
func mapFile(fd *os.File, size int64) ([]byte, func() error, error) {
	if size == 0 {
		return nil, func() error { return nil }, nil
	}
	if int64(int(size)) != size {
		return nil, nil, fmt.Errorf("%s: file too large to map", fd.Name())
	}
	b, err := syscall.Mmap(int(fd.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", fd.Name(), err)
	}
	return b, func() error { return syscall.Munmap(b) }, nil
}
