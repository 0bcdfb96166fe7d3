// Package adapt adapts a DGF draft online to the text it drafts for, from
// what verification computed anyway: the Adapter keeps records of the
// target's features and a text memory of verified text, trains a shadow
// of the live draft through a Learner (package train) on a goroutine of
// its own, and publishes it when it beats the live one on held-out
// records (background mode), or takes a step per round on the request's
// own text (per-request mode). Its Drafter drafts with the live draft and
// grafts what the text memory recalls onto the tree.
package adapt

import (
	"fmt"

	"dovetail/models/draft"
)

// Mode says how a draft adapts to the text it drafts for.
type Mode int

const (
	// Off keeps the draft as it is.
	Off Mode = iota
	// Background trains a shadow copy of the draft on a goroutine
	// from what verification computed, and swaps it in between rounds
	// when it beats the live one on held-out recent records.
	Background
	// PerRequest (Test-Time Speculation) takes one gradient step per
	// verified round on the request's own text, held to the draft the
	// request started with, and goes back to that draft afterwards.
	PerRequest
)

var adaptModes = []string{"off", "background", "per-request"}

func (m Mode) String() string {
	if int(m) < len(adaptModes) {
		return adaptModes[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode reads off, background or per-request.
func ParseMode(s string) (Mode, error) {
	for i, n := range adaptModes {
		if s == n {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("adaptation mode %q: want off, background or per-request", s)
}

// Learner is the device side of adaptation (train.Learner): a shadow copy
// of the live draft that trains, scored against the version it last kept.
// Only the adapter's goroutine calls it, but for Stop.
type Learner interface {
	// Train takes one optimizer step of the shadow on ws.
	Train(ws []Window) (draft.Score, error)
	// Compare scores the shadow and the kept version on held-out ws.
	Compare(ws []Window) (shadow, kept draft.Score, err error)
	// Publish makes the shadow the live draft's newest version; keep
	// makes it the kept version too (else it is a per-request trial).
	Publish(keep bool) (version int, err error)
	// Restore sets the shadow, and the live draft, back to the kept
	// version.
	Restore() error
	// Version is the kept version's number.
	Version() int
	// Stop, from any goroutine, makes a Train or Compare under way end
	// soon with an error, its work dropped, and every later one at
	// once; the kept version stays as the last Publish left it.
	Stop()
}
