package train

import "errors"

// ErrStopped ends a training step or a scoring that the trainer was told to
// stop (StopWhen) while it ran: the step's gradients are dropped before
// the optimizer's update, so no weight changed.
var ErrStopped = errors.New("training stopped")

// stopping unwinds a step from deep in the draft's forward or backward
// pass (inside its blocks' attention), where no error can be returned.
type stopping struct{}

// StopWhen makes the trainer check stopped (nil: never) between the
// device operations of its steps and scorings — per window in attention,
// per block, per unroll step, per window of the loss and the LM head — and
// end the one under way with ErrStopped as soon as it says so: a step of a
// large draft on the CPU takes seconds, and a program that quits must not
// wait for it. stopped is called from the trainer's goroutine; it may
// read what another goroutine sets (an atomic flag).
func (t *Trainer) StopWhen(stopped func() bool) { t.stopped = stopped }

// check unwinds the step under way once the trainer is told to stop.
// It runs between device operations: none is ever left half done.
func (t *Trainer) check() {
	if t.stopped != nil && t.stopped() {
		panic(stopping{})
	}
}

// recoverStop turns check's unwinding into ErrStopped; other panics go on.
func recoverStop(err *error) {
	if r := recover(); r != nil {
		if _, ok := r.(stopping); !ok {
			panic(r)
		}
		*err = ErrStopped
	}
}
