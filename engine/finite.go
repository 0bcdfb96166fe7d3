package engine

import (
	"errors"
	"fmt"
	"math"
)

// ErrNotFinite is a forward pass whose logits hold NaN or ±Inf: weights
// that are damaged, or activations that overflow. Nothing sampled from
// them means anything (argmax picks whatever NaN compares below).
var ErrNotFinite = errors.New("the forward pass produced logits that are not numbers")

// checkFinite refuses a logits row holding a value that is not finite. It
// reads the row once per emitted token, which the sampler reads at least
// once more: a small share of that, and nothing beside the forward pass.
func checkFinite(row []float32, pos int) error {
	for i, v := range row {
		if !(v >= -math.MaxFloat32 && v <= math.MaxFloat32) {
			return fmt.Errorf("%w (%v at token %d of the vocabulary, for position %d)", ErrNotFinite, v, i, pos)
		}
	}
	return nil
}
