package cpu

import (
	"math"

	"dovetail/models"
)

// ropeTable holds cos and sin of every position × dimension pair.
type ropeTable struct {
	pairs    int
	cos, sin []float32 // [pos*pairs + j]
}

// at returns position pos's cos and sin, one per pair.
func (t *ropeTable) at(pos int) (cos, sin []float32) {
	return t.cos[pos*t.pairs : (pos+1)*t.pairs], t.sin[pos*t.pairs : (pos+1)*t.pairs]
}

// newRopeTable precomputes the rotation angles: pair j of position p turns
// by (p/scale) · base^(−2j/dim) / freqs[j]. The reference computes the
// same angles on the fly, bit for bit.
func newRopeTable(c models.Config, freqs []float32, ctx int) *ropeTable {
	pairs := c.RopeDim / 2
	t := &ropeTable{pairs: pairs, cos: make([]float32, ctx*pairs), sin: make([]float32, ctx*pairs)}
	for j := 0; j < pairs; j++ {
		theta := math.Pow(float64(c.RopeTheta), -2*float64(j)/float64(c.RopeDim))
		if freqs != nil {
			theta /= float64(freqs[j])
		}
		for p := 0; p < ctx; p++ {
			a := float64(p) / float64(c.RopeScale) * theta
			t.cos[p*pairs+j] = float32(math.Cos(a))
			t.sin[p*pairs+j] = float32(math.Sin(a))
		}
	}
	return t
}
