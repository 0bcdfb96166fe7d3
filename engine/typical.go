package engine

import (
	"cmp"
	"math"
	"slices"
)

// typicalCand is a candidate and how far its surprise is from the entropy.
type typicalCand struct {
	c candidate
	d float64
}

// typical is locally typical sampling (Meister et al. 2022) as llama.cpp's
// typical_p does it: the candidates ordered by how far their surprise,
// −ln p, is from the distribution's entropy, the fewest whose probability
// adds up to more than p are kept. cand comes sorted by byLogit with
// normalized probabilities and goes back so, renormalized over the kept.
// Equal distances keep byLogit's order, so the cut is deterministic.
func (s *Sampler) typical(cand []candidate, p float32) []candidate {
	var h float64
	for _, c := range cand {
		if c.p > 0 { // 0·ln 0 = 0, where llama.cpp's float math gives NaN
			q := float64(c.p)
			h -= q * math.Log(q)
		}
	}
	tc := s.typ[:0]
	for _, c := range cand {
		tc = append(tc, typicalCand{c: c, d: math.Abs(-math.Log(float64(c.p)) - h)})
	}
	s.typ = tc
	slices.SortStableFunc(tc, func(a, b typicalCand) int { return cmp.Compare(a.d, b.d) })
	keep := len(tc)
	var cum float32
	for i := range tc {
		cum += tc[i].c.p
		if cum > p {
			keep = i + 1
			break
		}
	}
	cand = cand[:keep]
	for i := range cand {
		cand[i] = tc[i].c
	}
	slices.SortFunc(cand, byLogit)
	softmaxCand(cand, 1)
	return cand
}
