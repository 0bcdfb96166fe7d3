//go:build unix

package pull

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// freeBytes is the space left in dir's file system for this user.
func freeBytes(dir string) (int64, bool) {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), true
}

// lock holds f for this process alone, so that two pulls of one blob
// (the CLI's and the server's) do not write one partial file.
func lock(f *os.File) (bool, error) {
	err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
