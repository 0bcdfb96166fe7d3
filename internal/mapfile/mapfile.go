// Package mapfile maps a file read-only into memory, so that a model's
// tensors are read where they lie: only the pages touched are resident,
// and the OS may drop them again. Where mmap is not available the file is
// read whole.
package mapfile

import (
	"fmt"
	"os"
)

// Mapped reports whether Map's bytes are a file mapping (unix): memory the
// OS reads back from the file, which Evict may drop.
const Mapped = mapped

// Open maps the regular file at path whole (see Map); release unmaps it.
func Open(path string) (b []byte, release func() error, err error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, nil, fmt.Errorf("%s: not a regular file", path)
	}
	return Map(fd, st.Size())
}
