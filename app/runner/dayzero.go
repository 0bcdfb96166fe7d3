package runner

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"dovetail/engine/adapt"
	"dovetail/internal/osthread"
	"dovetail/models/draft"
)

// dayZero starts a new, untrained draft and its trainer in the background:
// drafting with it helps nothing before it has learned, so nothing of it
// stands before the first token. It starts once no generation has run for
// quietBefore (or after maxQuietWait, however busy the runner is): its
// memory traffic slows decoding beside it even from an idle-priority
// thread, which it runs on where the system has them. Requests that begin
// before it is ready decode without a draft; it takes the slots between
// requests.
type dayZero struct {
	ready chan struct{} // closed when the start has ended, well or not

	mu        sync.Mutex
	cancelled bool
	began     time.Time // when the quiet wait ended and the start began
}

// startDayZero starts the draft of d (placed on devs) in the background.
// d's info says now what it will be; the runner takes its drafters when
// they are built.
func (r *Runner) startDayZero(d *drafting, devs draftDevices, cfg draft.Config, where string, adapting bool) {
	z := &dayZero{ready: make(chan struct{})}
	d.info = DraftInfo{Name: "dgf:untrained", Device: devs.drafter.Name(), Adapt: r.opts.Adapt.Mode}
	if adapting && devs.trainer != nil {
		d.info.Trainer = devs.trainer.Name()
	}
	d.dayZero = z
	go func() {
		defer close(z.ready)
		runtime.LockOSThread() // never unlocked: the idle thread exits with the goroutine
		osthread.Idle()        // where it fails the start runs at normal priority
		if !r.waitQuiet(z) {
			devs.close()
			return
		}
		z.mu.Lock()
		z.began = time.Now()
		z.mu.Unlock()
		built := &drafting{}
		if err := r.startDGFUnless(z.stopped, built, devs, cfg, nil, where, adapting); err != nil {
			if errors.Is(err, errStopped) {
				return
			}
			r.mu.Lock()
			d.info = DraftInfo{Name: "none", Adapt: adapt.Off}
			r.mu.Unlock()
			r.notify(Notice{Warning: true, Text: fmt.Sprintf("drafting off: the new draft did not start: %v", err)})
			return
		}
		if z.stopped() || !r.takeDrafting(d, built) {
			built.close()
		}
	}()
}

// quietBefore is how long no generation must have run before a new draft
// starts, and maxQuietWait how long it waits for that at most.
const (
	quietBefore  = 100 * time.Millisecond
	maxQuietWait = 10 * time.Second
)

// waitQuiet waits until the runner has been quiet for quietBefore, or for
// maxQuietWait; false when z was stopped meanwhile.
func (r *Runner) waitQuiet(z *dayZero) bool {
	for deadline := time.Now().Add(maxQuietWait); !r.quietFor(quietBefore) && time.Now().Before(deadline); {
		if z.stopped() {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return !z.stopped()
}

// stop asks a start under way to give up as soon as it can.
func (z *dayZero) stop() {
	z.mu.Lock()
	z.cancelled = true
	z.mu.Unlock()
}

func (z *dayZero) stopped() bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.cancelled
}

// takeDrafting gives d and the slots the drafters of built, unless the
// runner is closing; it reports whether it took them.
func (r *Runner) takeDrafting(d, built *drafting) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	d.drafters, d.adaptive = built.drafters, built.adaptive
	d.closers = append(d.closers, built.closers...)
	for i, dr := range built.drafters {
		r.slots[i].drafter = dr
	}
	if d.adaptive != nil && r.pauseLearning {
		d.adaptive.adapter.SetPaused(true)
	}
	return true
}

// WaitDraft waits until a draft starting in the background has started
// (or failed to); it returns at once when none is.
func (r *Runner) WaitDraft() {
	if r.draft != nil && r.draft.dayZero != nil {
		<-r.draft.dayZero.ready
	}
}
