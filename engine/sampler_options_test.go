package engine

import (
	"math"
	"slices"
	"testing"
)

// probsOf is the distribution of a sampler at the end of history.
func probsOf(s *Sampler, logits []float32, history []int) []float32 {
	out := make([]float32, len(logits))
	s.Probs(out, logits, history)
	return out
}

// near checks got against want (token → probability; others 0).
func near(t *testing.T, what string, got []float32, want map[int]float64) {
	t.Helper()
	for i, p := range got {
		if math.Abs(float64(p)-want[i]) > 1e-5 {
			t.Errorf("%s: p[%d] = %.6f, want %.6f (all: %v)", what, i, p, want[i], got)
		}
	}
}

// The window is the last RepeatLastN tokens (0: 64, -1: all), each token
// once with its count, ascending; tokens outside the vocabulary are left.
func TestPenaltyWindow(t *testing.T) {
	history := []int{2, 5, 2, 7, 2, 5, 9}
	for _, c := range []struct {
		lastN int
		want  []penalty
	}{
		{3, []penalty{{2, 1}, {5, 1}}}, // 9 is outside a vocabulary of 9
		{1, nil},
		{-1, []penalty{{2, 3}, {5, 2}, {7, 1}}},
		{0, []penalty{{2, 3}, {5, 2}, {7, 1}}},
	} {
		s := NewSampler(SamplerParams{FrequencyPenalty: 1, RepeatLastN: c.lastN})
		if got := s.penalties(history, 9); !slices.Equal(got, c.want) {
			t.Errorf("last %d: %v, want %v", c.lastN, got, c.want)
		}
	}
	// 0 is 64: of 70 tokens the first 6 are out of the window.
	long := make([]int, 70)
	for i := range long {
		long[i] = i
	}
	if got := NewSampler(SamplerParams{PresencePenalty: 1}).penalties(long, 100); len(got) != 64 || got[0].id != 6 {
		t.Errorf("default window: %d tokens from %v", len(got), got[0])
	}
	if got := NewSampler(SamplerParams{PresencePenalty: 1, RepeatLastN: -1}).penalties(long, 100); len(got) != 70 {
		t.Errorf("whole window: %d tokens", len(got))
	}
	// All penalties off: no window.
	if got := NewSampler(SamplerParams{RepeatPenalty: 1, RepeatLastN: -1}).penalties(history, 9); got != nil {
		t.Errorf("penalties off: %v", got)
	}
}

// Frequency and presence penalties as llama.cpp takes them, by hand on a
// 7-token vocabulary: logit −= count·frequency + presence, after the
// repeat penalty.
func TestFrequencyPresencePenalty(t *testing.T) {
	history := []int{1, 1, 5, 3}
	// 1: 3.0 − (2·0.5 + 0.25) = 1.75; 5: 2.9 − 0.75 = 2.15; 3: −1 − 0.75 = −1.75.
	p := SamplerParams{FrequencyPenalty: 0.5, PresencePenalty: 0.25}
	if got := NewSampler(p).Sample(testLogits, history); got != 2 { // 2.5 is now the largest
		t.Errorf("greedy picked %d, want 2", got)
	}
	p.Temperature = 1
	want := []float32{1.0, 1.75, 2.5, -1.75, 0.5, 2.15, 0.0}
	near(t, "frequency+presence", probsOf(NewSampler(p), testLogits, history), exactSoftmax(want, []int{0, 1, 2, 3, 4, 5, 6}, 1))
	// With a repeat penalty of 2 first: 1: 3/2 − 1.25 = 0.25; 5: 2.9/2 − 0.75 = 0.7; 3: −1·2 − 0.75 = −2.75.
	p.RepeatPenalty = 2
	want = []float32{1.0, 0.25, 2.5, -2.75, 0.5, 0.7, 0.0}
	near(t, "repeat+frequency+presence", probsOf(NewSampler(p), testLogits, history), exactSoftmax(want, []int{0, 1, 2, 3, 4, 5, 6}, 1))
	// Negative penalties make repeats more likely: 5 wins with 2.9 + 0.5 + 0.5.
	if got := NewSampler(SamplerParams{FrequencyPenalty: -0.5, PresencePenalty: -0.5}).Sample(testLogits, []int{5}); got != 5 {
		t.Errorf("negative penalties: picked %d, want 5", got)
	}
	// The window bounds the count: with the last 2 tokens, 1 is not penalized.
	p = SamplerParams{FrequencyPenalty: 2, RepeatLastN: 2}
	if got := NewSampler(p).Sample(testLogits, history); got != 1 {
		t.Errorf("window of 2: picked %d, want 1", got)
	}
	// With top-k the same penalties apply (the selection path).
	p = SamplerParams{Temperature: 1, TopK: 3, FrequencyPenalty: 0.5, PresencePenalty: 0.25}
	near(t, "top-k 3", probsOf(NewSampler(p), testLogits, history), exactSoftmax([]float32{1.0, 1.75, 2.5, -1.75, 0.5, 2.15, 0.0}, []int{2, 5, 1}, 1))
}

// zipfLogits has probabilities 0.5, 0.2, 0.15, 0.1, 0.05.
var typicalLogits = []float32{float32(math.Log(0.5)), float32(math.Log(0.2)), float32(math.Log(0.15)), float32(math.Log(0.1)), float32(math.Log(0.05))}

// Typical-p by hand on 5 tokens: the entropy is 1.3331 nats; the
// surprises' distances from it are 0.640, 0.276, 0.564, 0.970, 1.663, so
// the order is 1, 2, 0, 3, 4 and the most likely token is not the most
// typical.
func TestTypicalPByHand(t *testing.T) {
	for _, c := range []struct {
		p    float32
		keep []int
	}{
		{0.1, []int{1}},       // 0.2 > 0.1
		{0.3, []int{1, 2}},    // 0.2, then 0.35 > 0.3
		{0.5, []int{1, 2, 0}}, // 0.35, then 0.85 > 0.5
		{0.99, []int{0, 1, 2, 3, 4}},
	} {
		s := NewSampler(SamplerParams{Temperature: 1, TypicalP: c.p})
		near(t, "typical", probsOf(s, typicalLogits, nil), exactSoftmax(typicalLogits, c.keep, 1))
	}
	// Typical-p comes after top-k and before top-p: of the top 4
	// (0.526, 0.211, 0.158, 0.105; entropy 1.195; distances 0.553,
	// 0.361, 0.650, 1.058), 0.4 keeps 1 and 0, and top-p 0.5 of those
	// (0.714, 0.286) keeps 0 alone.
	s := NewSampler(SamplerParams{Temperature: 1, TopK: 4, TypicalP: 0.4})
	near(t, "top-k then typical", probsOf(s, typicalLogits, nil), exactSoftmax(typicalLogits, []int{0, 1}, 1))
	s = NewSampler(SamplerParams{Temperature: 1, TopK: 4, TypicalP: 0.4, TopP: 0.5})
	near(t, "typical then top-p", probsOf(s, typicalLogits, nil), map[int]float64{0: 1})
	// The sum must pass p, not reach it: four equally typical tokens of
	// 0.25 (ties in token order) reach 0.5 with two and pass it with three.
	flat := []float32{0, 0, 0, 0, float32(math.Inf(-1))}
	s = NewSampler(SamplerParams{Temperature: 1, TypicalP: 0.5})
	near(t, "typical ties", probsOf(s, flat, nil), map[int]float64{0: 1. / 3, 1: 1. / 3, 2: 1. / 3})
	// 1 is off.
	s = NewSampler(SamplerParams{Temperature: 1, TypicalP: 1})
	near(t, "typical 1", probsOf(s, typicalLogits, nil), exactSoftmax(typicalLogits, []int{0, 1, 2, 3, 4}, 1))
}

// Mirostat 2 by hand on 5 tokens (surprises 1, 2.32, 2.74, 3.32, 4.32
// bits): the first draw is at mu = 2·tau, and keeps the tokens whose
// surprise is at most mu.
func TestMirostat2ByHand(t *testing.T) {
	s := NewSampler(SamplerParams{Temperature: 1, Mirostat: 2, MirostatTau: 1.5, MirostatEta: 0.1, Seed: 1})
	for _, c := range []struct {
		mu   float64
		keep []int
	}{{3, []int{0, 1, 2}}, {0.5, []int{0}}, {2.5, []int{0, 1}}, {10, []int{0, 1, 2, 3, 4}}} {
		cand := s.mirostat(typicalLogits, nil, c.mu)
		got := make([]float32, len(typicalLogits))
		for _, x := range cand {
			got[x.id] = x.p
		}
		near(t, "mirostat 2", got, exactSoftmax(typicalLogits, c.keep, 1))
	}
	// mu starts at 2·1.5 = 3.
	near(t, "first position", probsOf(s, typicalLogits, []int{7}), exactSoftmax(typicalLogits, []int{0, 1, 2}, 1))
	// A draw of token i (p 0.588, 0.235, 0.176 among the three kept)
	// moves mu by 0.1·(1.5 − surprise): 0.0734, −0.0587, −0.1003.
	history := []int{7}
	tok := s.Sample(typicalLogits, history)
	after := map[int]float64{0: 3.07345, 1: 2.94125, 2: 2.89975}[tok]
	if got := s.miro.at(2, 1.5); math.Abs(got-after) > 1e-4 {
		t.Errorf("drew %d: mu %v, want %v", tok, got, after)
	}
	// The position drawn again starts from its own mu, not the one after.
	s.Sample(typicalLogits, history)
	if got := s.miro.at(1, 1.5); got != 3 {
		t.Errorf("redrawn position: mu %v, want 3", got)
	}
}

// Mirostat 1 on Zipf-distributed probabilities, p_i ∝ (i+1)^−2: the fitted
// exponent is exactly 2, so k = (2^mu / (1 − 1/N))^½ over a vocabulary of
// N. Only the m = 100 most likely tokens enter the fit: a steep tail after
// them does not move it.
func TestMirostat1ByHand(t *testing.T) {
	zipf := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(-2 * math.Log(float64(min(i, 99)+1)))
			if i > 99 {
				x[i] -= float32(5 * (i - 99))
			}
		}
		return x
	}
	s := NewSampler(SamplerParams{Temperature: 1, Mirostat: 1})
	for _, c := range []struct {
		n    int
		mu   float64
		keep int
	}{
		{7, 2, 2},       // √(4·7/6) = 2.16
		{7, 4, 4},       // √(16·7/6) = 4.32
		{7, 6, 7},       // √(64·7/6) = 8.64: all 7
		{151, 8, 16},    // √(256·151/150) = 16.05
		{151, 0.5, 1},   // √(1.41·151/150) = 1.19
		{151, -40, 1},   // k < 1 is 1
		{151, 1e6, 151}, // 2^mu overflows: all
	} {
		logits := zipf(c.n)
		cand := s.mirostat(logits, nil, c.mu)
		ids := make([]int, c.keep)
		for i := range ids {
			ids[i] = i
		}
		got := make([]float32, c.n)
		for _, x := range cand {
			got[x.id] = x.p
		}
		near(t, "mirostat 1", got, exactSoftmax(logits, ids, 1))
	}
	// A single token and equal logits do not break the fit.
	if cand := s.mirostat([]float32{0.3}, nil, 3); len(cand) != 1 {
		t.Errorf("one token: %v", cand)
	}
	if cand := s.mirostat(make([]float32, 9), nil, 3); len(cand) < 1 {
		t.Errorf("equal logits: %v", cand)
	}
}

// Mirostat samples at the temperature and after the penalties, ignores
// top-k and top-p, and its draws follow what Probs says.
func TestMirostatChain(t *testing.T) {
	p := SamplerParams{Temperature: 0.5, TopK: 1, TopP: 0.1, Mirostat: 2, MirostatTau: 10, MirostatEta: 0.1, RepeatPenalty: 3}
	if p.Greedy() {
		t.Fatal("top-k 1 made mirostat greedy")
	}
	// mu 20 keeps every token: the plain softmax at T = 0.5 after the
	// penalty (1: 3.0/3 = 1).
	pen := []float32{1.0, 1.0, 2.5, -1.0, 0.5, 2.9, 0.0}
	near(t, "chain", probsOf(NewSampler(p), testLogits, []int{1}), exactSoftmax(pen, []int{0, 1, 2, 3, 4, 5, 6}, 0.5))
}

func TestValidateOptions(t *testing.T) {
	nan := float32(math.NaN())
	bad := []SamplerParams{{RepeatLastN: -2}, {FrequencyPenalty: 2.5}, {FrequencyPenalty: nan}, {PresencePenalty: -3},
		{TypicalP: 1.5}, {TypicalP: -0.1}, {Mirostat: 3}, {Mirostat: -1}, {MirostatTau: -1}, {MirostatEta: nan},
		{MirostatTau: float32(math.Inf(1))}}
	for _, p := range bad {
		if p.Validate() == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	good := SamplerParams{RepeatLastN: -1, FrequencyPenalty: -2, PresencePenalty: 2, TypicalP: 0.5, Mirostat: 2, MirostatTau: 5, MirostatEta: 0.1}
	if err := good.Validate(); err != nil {
		t.Error(err)
	}
}
