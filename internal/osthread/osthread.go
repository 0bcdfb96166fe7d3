// Package osthread sets scheduling properties of the calling OS thread.
package osthread

// Idle makes the calling thread run only on CPU time nobody else wants
// (Linux's SCHED_IDLE): a background worker then never slows the threads
// that serve a user. The caller must have locked its goroutine to the
// thread (runtime.LockOSThread) and keep it locked: the property stays
// with the thread.
func Idle() error { return idle() }
