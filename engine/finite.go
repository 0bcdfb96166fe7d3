package engine

import (
	"errors"
	"fmt"
	"math"
)

// ErrNotFinite is a forward pass whose logits or hidden states hold NaN or
// ±Inf: weights that are damaged, or activations that overflow. Nothing
// sampled or pooled from them means anything (argmax picks whatever NaN
// compares below).
var ErrNotFinite = errors.New("the forward pass produced values that are not numbers")

// checkFinite refuses a logits row holding a value that is not finite. It
// reads the row once per emitted token, without a branch per value (v·0
// is 0 for a finite v and NaN otherwise, and NaN stays in a sum): a
// fraction of what the sampler's own reads of the row cost, and nothing
// beside the forward pass that made it.
func checkFinite(row []float32, pos int) error {
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(row); i += 4 {
		y := row[i : i+4 : i+4]
		s0 += y[0] * 0
		s1 += y[1] * 0
		s2 += y[2] * 0
		s3 += y[3] * 0
	}
	for ; i < len(row); i++ {
		s0 += row[i] * 0
	}
	if s0+s1+s2+s3 == 0 {
		return nil
	}
	for i, v := range row {
		if !(v >= -math.MaxFloat32 && v <= math.MaxFloat32) {
			return fmt.Errorf("%w (%v at token %d of the vocabulary, for position %d)", ErrNotFinite, v, i, pos)
		}
	}
	return nil
}
