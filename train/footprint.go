package train

import (
	"dovetail/device"
	"dovetail/dgf"
	"dovetail/models"
	"dovetail/models/draft"
)

// Footprint is the memory, in bytes, a draft takes on its devices: what a
// memory budget counts before anything is allocated.
type Footprint struct {
	// Draft is the drafting device's share: the live draft's weights
	// (with a spare version for the next publication when it adapts), the
	// frozen matrices it holds in its own form, and every sequence's cache
	// and scratch.
	Draft uint64
	// Trainer is the training device's share: the shadow, the kept
	// version, gradients, AdamW moments, and activations of a batch.
	Trainer uint64
}

// Learn is the shape of the trainer Measure counts (nil: none).
type Learn struct {
	Config          TrainConfig
	MaxRows, MaxLen int
	EvalDepth       int
}

// Measure counts what a draft of shape c for target m takes: drafting on
// dd with sequences sequences of ctx positions, and learning as l says
// (nil: no trainer) on td. It runs the same set-up code as the real
// devices on ones that only count (device.NewCounter: as a GPU or the
// host holds).
func Measure(c draft.Config, m *models.Llama, ctx, sequences int, l *Learn, dd, td *device.Counter) (_ Footprint, err error) {
	return MeasureEmbedding(c, m, nil, ctx, sequences, l, dd, td)
}

// MeasureEmbedding is Measure for a draft with embeddings of its own (an
// EAGLE checkpoint's; nil: the target's, see dgf.NewDraftEmbedding).
func MeasureEmbedding(c draft.Config, m *models.Llama, embd *models.Tensor, ctx, sequences int, l *Learn, dd, td *device.Counter) (_ Footprint, err error) {
	defer device.Catch(&err)
	d, err := dgf.NewDraftEmbedding(dd, c, m, embd)
	if err != nil {
		return Footprint{}, err
	}
	if err := d.FreezeForDrafting(); err != nil {
		return Footprint{}, err
	}
	live := dgf.NewLive(d, 0)
	// As the runner does: the live versions keep only what drafting reads.
	live.DropFloat()
	var lr *Learner
	if l != nil {
		lr = NewLearner(live, td, l.Config, l.MaxRows, l.MaxLen, l.EvalDepth)
	}
	for range sequences {
		live.NewSequence(ctx)
	}
	if lr != nil {
		// Publishing leaves a spare version beside the newest.
		if _, err := lr.Publish(true); err != nil {
			return Footprint{}, err
		}
	}
	return Footprint{Draft: dd.Held(), Trainer: td.Held()}, nil
}
