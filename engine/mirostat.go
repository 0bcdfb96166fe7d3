package engine

import (
	"math"
	"slices"
)

// Mirostat (Basu et al. 2021) as llama.cpp samples it: instead of top-k,
// typical-p, top-p and min-p, a truncation steered by mu so that the
// surprise of the drawn tokens stays near tau. Each draw moves mu, so the
// distribution at a position depends on every draw before it: the sampler
// keeps mu per position, and speculative decoding stays exact because its
// acceptor draws each position of the accepted path in order, as plain
// decoding does (engine/accept.go).

// mirostatM is how many of the most likely tokens mirostat 1 fits the
// Zipf exponent on (llama.cpp's m).
const mirostatM = 100

// muBound bounds mu: beyond it 2^±mu has long over- or underflowed (every
// candidate, or one, is kept), and mu stays finite whatever tau and eta.
const muBound = 1 << 20

// mirostatState is mu before each position's draw: mu[i] is position
// first+i's.
type mirostatState struct {
	first int
	mu    []float64
}

// at is mu before the draw at pos: 2·tau before the first draw, else
// what the draws before pos left (the last known, past them).
func (m *mirostatState) at(pos int, tau float32) float64 {
	i := pos - m.first
	switch {
	case len(m.mu) == 0 || i < 0:
		return 2 * float64(tau)
	case i >= len(m.mu):
		return m.mu[len(m.mu)-1]
	}
	return m.mu[i]
}

// drew records the draw at pos, made at mu before, leaving mu after; what
// later positions recorded is dropped (they followed another draw).
func (m *mirostatState) drew(pos int, before, after float64) {
	i := pos - m.first
	if len(m.mu) == 0 || i < 0 || i >= len(m.mu) {
		m.first, m.mu, i = pos, append(m.mu[:0], before), 0
	}
	m.mu = append(m.mu[:i+1], after)
}

// mirostat is the candidates mirostat keeps at mu: every token,
// penalized, at the temperature (llama.cpp's chain: temperature, then
// mirostat), truncated by version 1 or 2, renormalized, most likely first.
func (s *Sampler) mirostat(logits []float32, pen []penalty, mu float64) []candidate {
	cand := s.all(logits, pen)
	slices.SortFunc(cand, byLogit)
	softmaxCand(cand, s.p.Temperature)
	n := len(cand)
	if s.p.Mirostat == 1 {
		n = mirostat1K(cand, mu, len(logits))
	} else {
		for i, c := range cand {
			if -math.Log2(float64(c.p)) > mu {
				n = max(i, 1)
				break
			}
		}
	}
	cand = cand[:n]
	softmaxCand(cand, s.p.Temperature)
	return cand
}

// mirostat1K is how many candidates mirostat 1 keeps: the Zipf exponent
// s is fitted by least squares on the ratios of the m most likely
// probabilities, and k is the rank whose expected surprise under that
// Zipf law over the vocabulary is mu. Where the fit breaks down (a
// probability 0, all equal) k falls to 1 or the whole set, as llama.cpp's.
func mirostat1K(cand []candidate, mu float64, vocab int) int {
	var num, den float64
	for i := 0; i < mirostatM-1 && i < len(cand)-1; i++ {
		t := math.Log(float64(i+2) / float64(i+1))
		b := math.Log(float64(cand[i].p) / float64(cand[i+1].p))
		num += t * b
		den += t * t
	}
	sHat := num / den
	eps := sHat - 1
	k := math.Pow(eps*math.Exp2(mu)/(1-math.Pow(float64(vocab), -eps)), 1/sHat)
	switch {
	case !(k >= 1): // NaN included
		return 1
	case k < float64(len(cand)):
		return int(k)
	}
	return len(cand)
}

// learn moves mu after the draw at pos of a token of probability p: by
// eta times how much its surprise, −log2 p, exceeds tau.
func (s *Sampler) learn(pos int, p float32) {
	before := s.miro.at(pos, s.p.MirostatTau)
	surprise := -math.Log2(math.Max(float64(p), math.SmallestNonzeroFloat32))
	after := before - float64(s.p.MirostatEta)*(surprise-float64(s.p.MirostatTau))
	s.miro.drew(pos, before, min(max(after, -muBound), muBound))
}
