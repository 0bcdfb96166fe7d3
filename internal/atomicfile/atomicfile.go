// Package atomicfile writes files that are either whole or not there: a
// crash or a full disk never leaves a half-written file where a good one
// was.
package atomicfile

import (
	"io"
	"os"
	"path/filepath"
)

// Write writes path through write: to a temporary file in the same
// directory, fsynced, then renamed over path (mode 0644).
func Write(path string, write func(io.Writer) error) error {
	return WriteMode(path, 0o644, write)
}

// WriteMode is Write making a file of the given mode (0600 for what holds
// a user's text): the mode is set before anything is written.
func WriteMode(path string, mode os.FileMode, write func(io.Writer) error) error {
	tmp, err := writeTemp(path, mode, write)
	if err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	syncDir(path)
	return nil
}

// writeTemp writes a whole, fsynced temporary file beside path and
// returns its name; on an error it leaves none.
func writeTemp(path string, mode os.FileMode, write func(io.Writer) error) (name string, err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	// CreateTemp makes the file private (0600).
	if err = tmp.Chmod(mode); err != nil {
		return "", err
	}
	if err = write(tmp); err != nil {
		return "", err
	}
	if err = tmp.Sync(); err != nil {
		return "", err
	}
	if err = tmp.Close(); err != nil {
		return "", err
	}
	return tmp.Name(), nil
}

// syncDir makes a rename in path's directory durable.
func syncDir(path string) {
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
}
