package osthread

import (
	"runtime"
	"testing"
)

// Idle succeeds on Linux without privileges (lowering one's own priority
// needs none) and leaves the thread working.
func TestIdle(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("SCHED_IDLE is Linux's")
	}
	done := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		err := Idle()
		s := 0
		for i := range 1000 {
			s += i
		}
		if s != 499500 {
			t.Error("arithmetic on the idle thread")
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
