//go:build !unix

package safetensors

import (
	"fmt"
	"io"
	"os"
)

// mapFile reads the whole file where mmap is not available.
func mapFile(fd *os.File, size int64) ([]byte, func() error, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(fd, b); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", fd.Name(), err)
	}
	return b, func() error { return nil }, nil
}
