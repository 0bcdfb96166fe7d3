package train

import (
	"fmt"
	"sync/atomic"

	"dovetail/device"
	"dovetail/dgf"
	"dovetail/models/draft"
)

// Learner adapts a live draft online: a shadow copy trains on a device of
// its own (the GPU's spare time, or a host device with few threads) and
// is compared with the weights in use on held-out windows; the adaptation
// loop publishes it when it is better. It implements adapt.Learner
// (without importing engine). One goroutine uses it at a time; Stop may
// come from any.
//
// Its drafts and trainers take more memory than the live draft (the
// shadow and the kept version in float32, gradients, AdamW moments), and a
// session may never have enough text to train on: they are made on the
// first call that needs them, not by NewLearner.
type Learner struct {
	live     *dgf.Live
	setUpNow func() error // sets the fields below up; nil once done

	shadow  *dgf.Draft // trains
	base    *dgf.Draft // the last version the learner kept, on the shadow's device
	baseVer int
	trial   bool     // the live draft runs a per-request trial
	tr      *Trainer // trains shadow
	ev      *Trainer // scores with a chain of evalDepth steps

	halt atomic.Bool // Stop was called
}

// NewLearner prepares adaptation of live's newest version on dev (which may
// be the live draft's device): training by cfg on batches of at most
// maxRows positions in windows of at most maxLen, scoring chains of
// evalDepth draft steps. cfg.AnchorWeight > 0 holds the shadow to the
// last kept version (per-request adaptation). It allocates nothing on dev
// until the learner is first used (see Learner); an error setting it up
// then comes back from that call.
func NewLearner(live *dgf.Live, dev device.Device, cfg TrainConfig, maxRows, maxLen, evalDepth int) *Learner {
	l := &Learner{live: live, baseVer: live.Version()}
	l.setUpNow = func() error { return l.setUp(dev, cfg, maxRows, maxLen, evalDepth) }
	return l
}

// setUp snapshots the live draft's newest version as the shadow and the
// kept version, with their trainer and scorer.
func (l *Learner) setUp(dev device.Device, cfg TrainConfig, maxRows, maxLen, evalDepth int) (err error) {
	defer device.Catch(&err)
	shadow, ver, err := l.live.Snapshot(dev)
	if err != nil {
		return err
	}
	base, err := shadow.Clone(dev)
	if err != nil {
		shadow.Free()
		return err
	}
	tr, err := NewTrainer(shadow, cfg, maxRows, maxLen)
	if err == nil && cfg.AnchorWeight > 0 {
		err = tr.SetAnchor(base)
	}
	var ev *Trainer
	if err == nil {
		ev, err = NewScorer(tr, max(1, evalDepth))
	}
	if err != nil {
		if tr != nil {
			tr.Free()
		}
		base.Free()
		shadow.Free()
		return err
	}
	tr.StopWhen(l.halt.Load)
	ev.StopWhen(l.halt.Load)
	l.shadow, l.base, l.baseVer, l.tr, l.ev = shadow, base, ver, tr, ev
	return nil
}

// Stop makes a Train or Compare under way on another goroutine end soon
// with ErrStopped, and every later one at once, leaving the kept version
// (what Checkpoint saves) as the last Publish left it; Publish, Restore
// and Checkpoint still work. It may be called from any goroutine.
func (l *Learner) Stop() { l.halt.Store(true) }

// ready sets the learner up if it is not yet.
func (l *Learner) ready() error {
	if l.setUpNow == nil {
		return nil
	}
	if err := l.setUpNow(); err != nil {
		return fmt.Errorf("set up the draft's trainer: %w", err)
	}
	l.setUpNow = nil
	return nil
}

// SetUp reports whether the learner's drafts and trainers exist (it has
// been used).
func (l *Learner) SetUp() bool { return l.setUpNow == nil }

// Free releases the learner's drafts and buffers (not the live draft).
func (l *Learner) Free() {
	if l.setUpNow != nil {
		return
	}
	l.ev.Free()
	l.tr.Free()
	l.shadow.Free()
	l.base.Free()
}

func score(m Metrics) draft.Score {
	s := draft.Score{Loss: m.Loss, Tau: m.Tau}
	if len(m.Top1) > 0 {
		s.Top1 = m.Top1[0]
	}
	return s
}

// Train runs one optimizer step of the shadow on ws.
func (l *Learner) Train(ws []draft.Window) (draft.Score, error) {
	if l.halt.Load() {
		return draft.Score{}, ErrStopped // and no trainer set up for nothing
	}
	if err := l.ready(); err != nil {
		return draft.Score{}, err
	}
	m, err := l.tr.Step(ws)
	return score(m), err
}

// Compare scores the shadow and the last kept version on held-out ws.
func (l *Learner) Compare(ws []draft.Window) (shadow, kept draft.Score, err error) {
	if l.halt.Load() {
		return shadow, kept, ErrStopped
	}
	if err := l.ready(); err != nil {
		return shadow, kept, err
	}
	ms, err := l.ev.Eval(ws)
	if err != nil {
		return shadow, kept, err
	}
	mk, err := l.ev.EvalDraft(l.base, ws)
	return score(ms), score(mk), err
}

// Publish makes the shadow's weights the live draft's newest version.
// keep makes them also the version the learner compares with, restores
// and anchors to; without it (per-request adaptation) they are a trial
// that Restore takes back.
func (l *Learner) Publish(keep bool) (int, error) {
	if err := l.ready(); err != nil {
		return 0, err
	}
	v, err := l.live.Publish(l.shadow)
	if err != nil {
		return 0, err
	}
	l.trial = !keep
	if keep {
		if err := l.base.CopyWeights(l.shadow); err != nil {
			return 0, err
		}
		l.baseVer = v
	}
	return v, nil
}

// Restore sets the shadow back to the kept version and, when the live
// draft runs something else, publishes the kept weights again.
func (l *Learner) Restore() error {
	if l.setUpNow != nil {
		return nil // nothing trained: the shadow would be the kept version
	}
	if err := l.shadow.CopyWeights(l.base); err != nil {
		return err
	}
	l.tr.Opt.Reset()
	if !l.trial {
		return nil
	}
	// The live draft gets a new version number with the kept weights;
	// the kept version keeps its own.
	if _, err := l.live.Publish(l.base); err != nil {
		return fmt.Errorf("restore draft: %w", err)
	}
	l.trial = false
	return nil
}

// Version is the number of the version the learner keeps.
func (l *Learner) Version() int { return l.baseVer }

// Checkpoint copies the kept version to the host as a checkpoint.
// Before the learner is set up that is the live draft's newest version.
func (l *Learner) Checkpoint(fingerprint, targetName string) (*draft.Checkpoint, error) {
	if err := l.ready(); err != nil {
		return nil, err
	}
	return l.base.Checkpoint(fingerprint, targetName), nil
}
