package eagle

import (
	"fmt"
	"slices"

	"dovetail/models/draft"
	"dovetail/models/safetensors"
)

// vocabMap reads EAGLE-3's d2t (target id = d + d2t[d]) into target ids,
// checking that they are distinct and inside the target's vocabulary, and
// that t2d, where present, marks exactly them. Without d2t the head must
// cover the whole vocabulary: the identity (nil).
func vocabMap(d2t, t2d *safetensors.Tensor, c draft.Config, dir string) ([]int32, error) {
	if c.Kind != draft.EAGLE3 {
		for _, t := range []*safetensors.Tensor{d2t, t2d} {
			if t != nil {
				return nil, fmt.Errorf("%s: tensor %q: an EAGLE-1 draft has no reduced vocabulary", t.File, t.Name)
			}
		}
		return nil, nil
	}
	n := c.HeadVocab()
	if d2t == nil {
		if n != c.Vocab {
			return nil, fmt.Errorf("%s: tensor %q missing: the draft's head covers %d of the target's %d tokens", dir, d2tName, n, c.Vocab)
		}
		return nil, checkT2D(t2d, nil, c)
	}
	if !slices.Equal(d2t.Shape, []int{n}) {
		return nil, fmt.Errorf("%s: tensor %q has shape %v, want [%d]", d2t.File, d2t.Name, d2t.Shape, n)
	}
	off, err := d2t.Int64s()
	if err != nil {
		return nil, err
	}
	ids := make([]int32, n)
	seen := make([]int32, c.Vocab) // draft id + 1 that maps there
	for d, o := range off {
		id := int64(d) + o
		if id < 0 || id >= int64(c.Vocab) {
			return nil, fmt.Errorf("%s: tensor %q maps draft token %d to %d, outside the target's vocabulary of %d", d2t.File, d2t.Name, d, id, c.Vocab)
		}
		if seen[id] != 0 {
			return nil, fmt.Errorf("%s: tensor %q maps draft tokens %d and %d both to target token %d", d2t.File, d2t.Name, seen[id]-1, d, id)
		}
		seen[id] = int32(d) + 1
		ids[d] = int32(id)
	}
	return ids, checkT2D(t2d, ids, c)
}

// checkT2D checks that t2d marks the target ids of the draft's head (all
// of them for the identity, ids nil).
func checkT2D(t2d *safetensors.Tensor, ids []int32, c draft.Config) error {
	if t2d == nil {
		return nil
	}
	if !slices.Equal(t2d.Shape, []int{c.Vocab}) {
		return fmt.Errorf("%s: tensor %q has shape %v, want [%d]", t2d.File, t2d.Name, t2d.Shape, c.Vocab)
	}
	marks, err := t2d.Bools()
	if err != nil {
		return err
	}
	count := 0
	for _, m := range marks {
		if m {
			count++
		}
	}
	if count != c.HeadVocab() {
		return fmt.Errorf("%s: tensor %q marks %d tokens, but the draft's head has %d", t2d.File, t2d.Name, count, c.HeadVocab())
	}
	for d, id := range ids {
		if !marks[id] {
			return fmt.Errorf("%s: tensor %q does not mark target token %d, which d2t maps draft token %d to", t2d.File, t2d.Name, id, d)
		}
	}
	return nil
}
