package engine

import (
	"fmt"
	"math"
	"slices"
)

// SamplerParams are the user's sampling settings. The zero value is greedy.
// The chain is llama.cpp's: penalties, top-k, typical-p, top-p, min-p,
// temperature; or, with Mirostat, penalties, temperature, mirostat.
type SamplerParams struct {
	Temperature   float32 // ≤ 0: greedy (argmax after penalties)
	TopK          int     // ≤ 0: off
	TopP          float32 // ≥ 1 or ≤ 0: off
	MinP          float32 // ≤ 0: off
	TypicalP      float32 // locally typical sampling; ≥ 1 or ≤ 0: off
	RepeatPenalty float32 // 1 or 0: off
	// The penalties look at the last RepeatLastN tokens of the history,
	// prompt included (0: 64; -1: all of it). FrequencyPenalty is taken
	// from a logit once for each time its token occurs there,
	// PresencePenalty once if it does at all (llama.cpp's); 0 is off.
	RepeatLastN      int
	FrequencyPenalty float32
	PresencePenalty  float32
	// Mirostat 1 or 2 replaces top-k, typical-p, top-p and min-p with
	// Mirostat's truncation, which steers the surprise of the drawn
	// tokens (bits) towards MirostatTau at the rate MirostatEta (0: off).
	Mirostat    int
	MirostatTau float32
	MirostatEta float32
	Seed        uint64
}

// Validate names the first setting that is out of range.
func (p SamplerParams) Validate() error {
	nan := func(v float32) bool { return math.IsNaN(float64(v)) }
	inf := func(v float32) bool { return math.IsInf(float64(v), 0) }
	switch {
	case nan(p.Temperature) || p.Temperature > 100:
		return fmt.Errorf("temperature %v out of range [0, 100]", p.Temperature)
	case p.TopP < 0 || p.TopP > 1 || nan(p.TopP):
		return fmt.Errorf("top-p %v out of range [0, 1]", p.TopP)
	case p.MinP < 0 || p.MinP > 1 || nan(p.MinP):
		return fmt.Errorf("min-p %v out of range [0, 1]", p.MinP)
	case p.TypicalP < 0 || p.TypicalP > 1 || nan(p.TypicalP):
		return fmt.Errorf("typical-p %v out of range [0, 1]", p.TypicalP)
	case p.RepeatPenalty < 0 || nan(p.RepeatPenalty) || inf(p.RepeatPenalty):
		return fmt.Errorf("repeat penalty %v must not be negative", p.RepeatPenalty)
	case p.RepeatLastN < -1:
		return fmt.Errorf("repeat-last-n %d out of range (-1: the whole context, 0: 64, or a number of tokens)", p.RepeatLastN)
	case p.FrequencyPenalty < -2 || p.FrequencyPenalty > 2 || nan(p.FrequencyPenalty):
		return fmt.Errorf("frequency penalty %v out of range [-2, 2]", p.FrequencyPenalty)
	case p.PresencePenalty < -2 || p.PresencePenalty > 2 || nan(p.PresencePenalty):
		return fmt.Errorf("presence penalty %v out of range [-2, 2]", p.PresencePenalty)
	case p.Mirostat < 0 || p.Mirostat > 2:
		return fmt.Errorf("mirostat %d must be 0 (off), 1 or 2", p.Mirostat)
	case p.MirostatTau < 0 || nan(p.MirostatTau) || inf(p.MirostatTau):
		return fmt.Errorf("mirostat tau %v must not be negative", p.MirostatTau)
	case p.MirostatEta < 0 || nan(p.MirostatEta) || inf(p.MirostatEta):
		return fmt.Errorf("mirostat eta %v must not be negative", p.MirostatEta)
	case p.TopK < 0:
		return fmt.Errorf("top-k %d must not be negative", p.TopK)
	}
	return nil
}

// Greedy reports whether the settings pick the argmax (top-k 1 does,
// except under Mirostat, which ignores top-k).
func (p SamplerParams) Greedy() bool { return p.Temperature <= 0 || p.TopK == 1 && p.Mirostat == 0 }

// Sampler turns logits into tokens. The uniform number behind the token it
// draws at a position depends only on the seed and the position (the
// length of the history), not on how many draws came before: so the same
// seed and settings give the same text, and speculative decoding, whatever
// trees it drafts and verifies, draws exactly the tokens plain decoding
// would.
type Sampler struct {
	p    SamplerParams
	miro mirostatState

	// Buffers reused from one token to the next.
	cand []candidate
	win  []int
	pen  []penalty
	typ  []typicalCand
}

type candidate struct {
	id    int
	logit float32
	p     float32
}

// NewSampler returns a sampler for the settings (and seed) p.
func NewSampler(p SamplerParams) *Sampler {
	return &Sampler{p: p}
}

// Params returns the sampler's settings.
func (s *Sampler) Params() SamplerParams { return s.p }

// Sample picks the next token from logits, given the tokens so far (for the
// penalties). logits is not modified. Under Mirostat the draw moves mu for
// the next position: a sampler is to draw a sequence's positions in order,
// as plain decoding and the acceptor do.
func (s *Sampler) Sample(logits []float32, history []int) int {
	if s.p.Greedy() {
		return s.argmax(logits, history)
	}
	cand := s.candidates(logits, history)
	i := draw(cand, s.uniform(len(history)))
	if s.p.Mirostat != 0 {
		s.learn(len(history), cand[i].p)
	}
	return cand[i].id
}

// candidates is the processed distribution at the end of history, sorted
// by byLogit, normalized.
func (s *Sampler) candidates(logits []float32, history []int) []candidate {
	if s.p.Mirostat != 0 {
		pen := s.penalties(history, len(logits))
		return s.mirostat(logits, pen, s.miro.at(len(history), s.p.MirostatTau))
	}
	return s.filter(logits, history)
}

// uniform is the number in [0, 1) of position pos: a hash of the seed and
// pos (two rounds of splitmix64's finalizer), independent from one
// position to the next.
func (s *Sampler) uniform(pos int) float64 {
	x := mix64(mix64(s.p.Seed+0x9e3779b97f4a7c15) ^ uint64(pos))
	return float64(x>>11) / (1 << 53)
}

func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// Probs writes the processed distribution — the chain of SamplerParams
// applied — over the whole vocabulary into out: what Sample draws from
// (under Mirostat, at the mu the sampler's own draws left at that
// position). Lossless speculative sampling must accept against exactly
// this distribution.
func (s *Sampler) Probs(out, logits []float32, history []int) {
	clear(out)
	if s.p.Greedy() {
		out[s.argmax(logits, history)] = 1
		return
	}
	for _, c := range s.candidates(logits, history) {
		out[c.id] = c.p
	}
}

// argmax is the first index of the largest logit after penalties (0 if
// none is above -Inf). The penalized tokens are few: the stretches between
// them go through argmaxFirst, and each of them is taken on its own, in
// index order, so that the first of equal values still wins.
func (s *Sampler) argmax(logits []float32, history []int) int {
	best, bestV := 0, float32(math.Inf(-1))
	take := func(i int, v float32) {
		if v > bestV {
			best, bestV = i, v
		}
	}
	lo := 0
	for _, t := range s.penalties(history, len(logits)) {
		if i, v := argmaxFirst(logits[lo:t.id]); i >= 0 {
			take(lo+i, v)
		}
		take(t.id, s.penalize(logits[t.id], t.n))
		lo = t.id + 1
	}
	if i, v := argmaxFirst(logits[lo:]); i >= 0 {
		take(lo+i, v)
	}
	return best
}

// filter applies llama.cpp's chain — penalties, top-k, typical-p, top-p,
// min-p, temperature — and returns the surviving candidates, sorted by
// descending probability, with normalized probabilities.
func (s *Sampler) filter(logits []float32, history []int) []candidate {
	pen := s.penalties(history, len(logits))
	var cand []candidate
	if k := s.p.TopK; k > 0 && k < len(logits) {
		// byLogit is a total order (ids break ties), so the k best are
		// one set in one order however they are found: selecting them
		// gives what sorting everything would, without sorting the
		// vocabulary every token.
		cand = s.bestK(logits, pen, k)
	} else {
		cand = s.all(logits, pen)
	}
	slices.SortFunc(cand, byLogit)
	softmaxCand(cand, 1)
	if p := s.p.TypicalP; p > 0 && p < 1 {
		cand = s.typical(cand, p)
	}
	if p := s.p.TopP; p > 0 && p < 1 {
		var cum float32
		for i := range cand {
			cum += cand[i].p
			if cum >= p {
				cand = cand[:i+1]
				break
			}
		}
	}
	if m := s.p.MinP; m > 0 {
		floor := cand[0].p * m
		for i := range cand {
			if cand[i].p < floor {
				cand = cand[:i]
				break
			}
		}
	}
	softmaxCand(cand, s.p.Temperature)
	s.cand = cand[:0]
	return cand
}

// all is every token a candidate, the tokens of pen penalized, in s.cand's
// memory, unsorted.
func (s *Sampler) all(logits []float32, pen []penalty) []candidate {
	cand := s.cand[:0]
	for i, v := range logits {
		cand = append(cand, candidate{id: i, logit: v})
	}
	for _, t := range pen {
		cand[t.id].logit = s.penalize(cand[t.id].logit, t.n)
	}
	s.cand = cand[:0]
	return cand
}

// byLogit orders candidates by descending logit, ties by ascending id: a
// total order, so sorts and selections by it are deterministic.
func byLogit(a, b candidate) int {
	if a.logit != b.logit {
		if a.logit > b.logit {
			return -1
		}
		return 1
	}
	return a.id - b.id
}

// bestK is the k first of logits' candidates in byLogit's order (in no
// particular order), the tokens of pen (ascending) penalized, in s.cand's
// memory. The k so far are kept as a heap whose root is the worst of them,
// which each later candidate must beat: most of a vocabulary falls below
// the root's logit, which settles it as byLogit would (a NaN on either
// side goes to byLogit), and never becomes a candidate.
func (s *Sampler) bestK(logits []float32, pen []penalty, k int) []candidate {
	h := s.cand[:0]
	pen = append(pen, penalty{id: len(logits)}) // a stop past the end (pen is bestK's now): one compare a logit
	next := 0                                   // pen[next] is the next penalized token
	for i, v := range logits[:k] {
		if i == pen[next].id {
			v = s.penalize(v, pen[next].n)
			next++
		}
		h = append(h, candidate{id: i, logit: v})
	}
	// worse reports whether h[i] comes after h[j] in byLogit's order.
	worse := func(i, j int) bool { return byLogit(h[i], h[j]) > 0 }
	down := func(i int) {
		for {
			w, l, r := i, 2*i+1, 2*i+2
			if l < k && worse(l, w) {
				w = l
			}
			if r < k && worse(r, w) {
				w = r
			}
			if w == i {
				return
			}
			h[i], h[w] = h[w], h[i]
			i = w
		}
	}
	for i := k/2 - 1; i >= 0; i-- {
		down(i)
	}
	for i := k; i < len(logits); i++ {
		v := logits[i]
		if i == pen[next].id {
			v = s.penalize(v, pen[next].n)
			next++
		}
		if v < h[0].logit {
			continue
		}
		if c := (candidate{id: i, logit: v}); byLogit(c, h[0]) < 0 {
			h[0] = c
			down(0)
		}
	}
	return h
}

// softmaxCand sets p from logit/temp over sorted candidates.
func softmaxCand(cand []candidate, temp float32) {
	mx := cand[0].logit
	var sum float64
	for i := range cand {
		e := math.Exp(float64((cand[i].logit - mx) / temp))
		cand[i].p = float32(e)
		sum += e
	}
	for i := range cand {
		cand[i].p = float32(float64(cand[i].p) / sum)
	}
}

// draw picks the candidate where the cumulative probability passes u.
func draw(cand []candidate, u64 float64) int {
	u := float32(u64)
	var cum float32
	for i := range cand {
		cum += cand[i].p
		if u < cum {
			return i
		}
	}
	return len(cand) - 1
}
