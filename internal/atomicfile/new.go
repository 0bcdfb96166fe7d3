package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// WriteNewMode is WriteMode for a path that must not exist yet: the whole
// file is linked into place only if nothing is there (atomically where
// the file system has hard links), so an existing file is never replaced;
// the error then wraps fs.ErrExist.
func WriteNewMode(path string, mode os.FileMode, write func(io.Writer) error) error {
	tmp, err := writeTemp(path, mode, write)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	err = os.Link(tmp, path)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		// No hard links here (some network and FAT file systems): look,
		// then rename.
		if _, serr := os.Lstat(path); serr == nil {
			err = fs.ErrExist
		} else if err = os.Rename(tmp, path); err != nil {
			return err
		}
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists: %w", path, fs.ErrExist)
	}
	syncDir(path)
	return nil
}
