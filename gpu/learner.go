package gpu

import (
	"fmt"

	"dovetail/models/draft"
)

// Learner adapts a live draft online: a shadow copy trains on a device of
// its own (the GPU's spare time, or a host device with few threads) and
// is compared with the weights in use on held-out windows; the adaptation
// loop publishes it when it is better. It implements engine.Learner
// (without importing engine). One goroutine uses it at a time.
type Learner struct {
	live    *Live
	shadow  *Draft // trains
	base    *Draft // the last version the learner kept, on the shadow's device
	baseVer int
	trial   bool     // the live draft runs a per-request trial
	tr      *Trainer // trains shadow
	ev      *Trainer // scores with a chain of evalDepth steps
}

// NewLearner prepares adaptation of live's newest version on dev (which may
// be the live draft's device): training by cfg on batches of at most
// maxRows positions in windows of at most maxLen, scoring chains of
// evalDepth draft steps. cfg.AnchorWeight > 0 holds the shadow to the
// last kept version (per-request adaptation).
func NewLearner(live *Live, dev Device, cfg TrainConfig, maxRows, maxLen, evalDepth int) (_ *Learner, err error) {
	defer catchDevice(&err)
	shadow, ver, err := live.Snapshot(dev)
	if err != nil {
		return nil, err
	}
	base, err := shadow.Clone(dev)
	if err != nil {
		return nil, err
	}
	l := &Learner{live: live, shadow: shadow, base: base, baseVer: ver}
	if l.tr, err = NewTrainer(shadow, cfg, maxRows, maxLen); err != nil {
		return nil, err
	}
	if cfg.AnchorWeight > 0 {
		if err := l.tr.SetAnchor(base); err != nil {
			return nil, err
		}
	}
	if l.ev, err = NewScorer(l.tr, max(1, evalDepth)); err != nil {
		return nil, err
	}
	return l, nil
}

// Free releases the learner's drafts and buffers (not the live draft).
func (l *Learner) Free() {
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
	m, err := l.tr.Step(ws)
	return score(m), err
}

// Compare scores the shadow and the last kept version on held-out ws.
func (l *Learner) Compare(ws []draft.Window) (shadow, kept draft.Score, err error) {
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
func (l *Learner) Checkpoint(fingerprint, targetName string) *draft.Checkpoint {
	return l.base.Checkpoint(fingerprint, targetName)
}
