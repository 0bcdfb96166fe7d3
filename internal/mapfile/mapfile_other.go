//go:build !unix

package mapfile

import (
	"fmt"
	"io"
	"os"
)

const mapped = false

// Map reads the whole file where mmap is not available.
func Map(fd *os.File, size int64) ([]byte, func() error, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(fd, b); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", fd.Name(), err)
	}
	return b, func() error { return nil }, nil
}

// Evict does nothing: the data is the process's own memory.
func Evict([]byte) {}
