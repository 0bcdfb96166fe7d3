package osthread

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

func idle() error {
	attr := unix.SchedAttr{Size: uint32(unsafe.Sizeof(unix.SchedAttr{})), Policy: unix.SCHED_IDLE}
	return unix.SchedSetAttr(0, &attr, 0)
}
