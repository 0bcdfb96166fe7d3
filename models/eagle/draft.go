package eagle

import (
	"fmt"

	"dovetail/models"
	"dovetail/models/draft"
)

// Draft is the draft's shape for target, and the check that it fits it:
// the same hidden size, vocabulary and head dimension, and (EAGLE-3)
// feature layers inside the target. A mismatch is one line naming both
// models; the target is named by its Config.Name (the caller sets it to
// the file's name), else its architecture.
func (c Config) Draft(target models.Config) (draft.Config, error) {
	if c.Hidden != target.Hidden || c.Vocab != target.Vocab || c.HeadDim != target.HeadDim {
		return draft.Config{}, c.mismatch(target)
	}
	aux := c.Aux
	if c.Kind == draft.EAGLE3 {
		L := target.Layers
		if !c.AuxSet {
			aux = [3]int{2, L / 2, L - 3}
		}
		for _, l := range aux {
			if l < 0 || l >= L {
				return draft.Config{}, fmt.Errorf("EAGLE draft %s reads target layers %v, outside target %s's %d layers (0 to %d)",
					c.Dir, aux, targetName(target), L, L-1)
			}
		}
	}
	ctx := target.ContextLength
	if c.MaxPositions > 0 && c.MaxPositions < ctx {
		ctx = c.MaxPositions
	}
	d := draft.Config{Hidden: c.Hidden, Blocks: c.Layers, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim,
		FFN: c.FFN, Vocab: c.Vocab, Context: ctx, RopeTheta: c.RopeTheta, RMSEps: c.RMSEps,
		Kind: c.Kind, FCBias: c.FCBias}
	if c.Kind == draft.EAGLE3 {
		d.DraftVocab, d.Aux = c.DraftVocab, aux
	}
	if err := d.Validate(); err != nil {
		return draft.Config{}, fmt.Errorf("EAGLE draft %s: %w", c.Dir, err)
	}
	return d, nil
}

// mismatch says what each model is, in the terms that differ.
func (c Config) mismatch(t models.Config) error {
	head := func(d int) string {
		if c.HeadDim == t.HeadDim {
			return ""
		}
		return fmt.Sprintf(", head dimension %d", d)
	}
	return fmt.Errorf("EAGLE draft %s (hidden %d, vocabulary %d%s) does not fit target %s (hidden %d, vocabulary %d%s)",
		c.Dir, c.Hidden, c.Vocab, head(c.HeadDim), targetName(t), t.Hidden, t.Vocab, head(t.HeadDim))
}

func targetName(t models.Config) string {
	switch {
	case t.Name != "":
		return t.Name
	case t.Arch != "":
		return t.Arch
	}
	return "model"
}
