package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

var testLogits = []float32{1.0, 3.0, 2.5, -1.0, 0.5, 2.9, 0.0}

func TestGreedyIsArgmax(t *testing.T) {
	s := NewSampler(SamplerParams{})
	if got := s.Sample(testLogits, nil); got != 1 {
		t.Errorf("greedy picked %d, want 1", got)
	}
	// top-k 1 is greedy at any temperature.
	s = NewSampler(SamplerParams{Temperature: 2, TopK: 1, Seed: 3})
	for i := 0; i < 50; i++ {
		if got := s.Sample(testLogits, nil); got != 1 {
			t.Fatalf("top-k 1 picked %d", got)
		}
	}
}

func TestRepeatPenalty(t *testing.T) {
	s := NewSampler(SamplerParams{RepeatPenalty: 1.5})
	// 1 (3.0) is penalized to 2.0, so 5 (2.9) wins.
	if got := s.Sample(testLogits, []int{1}); got != 5 {
		t.Errorf("picked %d, want 5", got)
	}
	// A negative logit is pushed further down, not up.
	out := make([]float32, len(testLogits))
	s = NewSampler(SamplerParams{Temperature: 1, RepeatPenalty: 2})
	s.Probs(out, testLogits, []int{3})
	ref := make([]float32, len(testLogits))
	NewSampler(SamplerParams{Temperature: 1}).Probs(ref, testLogits, nil)
	if !(out[3] < ref[3]) {
		t.Errorf("penalized negative logit: p %v, unpenalized %v", out[3], ref[3])
	}
}

// exact computes the expected distribution by hand for a chain.
func exactSoftmax(logits []float32, keep []int, temp float64) map[int]float64 {
	var sum float64
	m := map[int]float64{}
	for _, i := range keep {
		m[i] = math.Exp(float64(logits[i]) / temp)
		sum += m[i]
	}
	for i := range m {
		m[i] /= sum
	}
	return m
}

func TestProbsChain(t *testing.T) {
	out := make([]float32, len(testLogits))
	cases := []struct {
		name string
		p    SamplerParams
		want map[int]float64
	}{
		{"temperature", SamplerParams{Temperature: 0.7}, exactSoftmax(testLogits, []int{0, 1, 2, 3, 4, 5, 6}, 0.7)},
		{"top-k 3", SamplerParams{Temperature: 1, TopK: 3}, exactSoftmax(testLogits, []int{1, 5, 2}, 1)},
		// Softmax at T=1: p(1)=.350 p(5)=.317 p(2)=.212 ...: top-p 0.6 keeps 1 and 5.
		{"top-p", SamplerParams{Temperature: 0.5, TopP: 0.6}, exactSoftmax(testLogits, []int{1, 5}, 0.5)},
		// min-p 0.5 keeps tokens with p ≥ p(1)/2: 1, 5, 2 (0.212/0.350 > 0.5).
		{"min-p", SamplerParams{Temperature: 1, MinP: 0.5}, exactSoftmax(testLogits, []int{1, 5, 2}, 1)},
	}
	for _, c := range cases {
		NewSampler(c.p).Probs(out, testLogits, nil)
		for i, p := range out {
			if math.Abs(float64(p)-c.want[i]) > 1e-6 {
				t.Errorf("%s: p[%d] = %.6f, want %.6f", c.name, i, p, c.want[i])
			}
		}
	}
}

func TestSampleFollowsProbs(t *testing.T) {
	p := SamplerParams{Temperature: 0.8, TopK: 5, TopP: 0.95, Seed: 42}
	probs := make([]float32, len(testLogits))
	NewSampler(p).Probs(probs, testLogits, nil)
	// One draw per seed: a sampler's draw at a position is fixed.
	const n = 40000
	counts := make([]int, len(testLogits))
	for i := 0; i < n; i++ {
		p.Seed = uint64(i)
		counts[NewSampler(p).Sample(testLogits, nil)]++
	}
	for i, c := range counts {
		want := float64(probs[i]) * n
		sd := math.Sqrt(want*(1-float64(probs[i]))) + 1
		if math.Abs(float64(c)-want) > 5*sd {
			t.Errorf("token %d drawn %d times, expected %.0f ± %.0f", i, c, want, sd)
		}
		if probs[i] == 0 && c != 0 {
			t.Errorf("token %d has probability 0 but was drawn %d times", i, c)
		}
	}
}

func TestSameSeedSameTokens(t *testing.T) {
	p := SamplerParams{Temperature: 1, Seed: 7}
	a, b, c := NewSampler(p), NewSampler(p), NewSampler(SamplerParams{Temperature: 1, Seed: 8})
	same, diff := true, false
	history := []int{}
	for i := 0; i < 100; i++ {
		x, y, z := a.Sample(testLogits, history), b.Sample(testLogits, history), c.Sample(testLogits, history)
		same = same && x == y
		diff = diff || x != z
		history = append(history, 0)
	}
	if !same {
		t.Error("same seed gave different tokens")
	}
	if !diff {
		t.Error("different seeds gave the same 100 tokens")
	}
}

// The draw at a position does not depend on the draws before it: what makes
// speculative sampling give plain decoding's very tokens.
func TestSampleDependsOnPositionOnly(t *testing.T) {
	p := SamplerParams{Temperature: 1, Seed: 5}
	a, b := NewSampler(p), NewSampler(p)
	history := []int{0, 0, 0, 0, 0, 0, 0}
	for i := 0; i < 50; i++ {
		a.Sample(testLogits, history[:i%5]) // draws b never makes
	}
	got, want := a.Sample(testLogits, history), b.Sample(testLogits, history)
	if got != want {
		t.Errorf("after other draws: token %d, a fresh sampler draws %d", got, want)
	}
	// And positions differ: over 64 positions, more than one token.
	seen := map[int]bool{}
	for pos := 0; pos < 64; pos++ {
		seen[b.Sample(testLogits, make([]int, pos))] = true
	}
	if len(seen) < 2 {
		t.Errorf("64 positions drew only %v", seen)
	}
}

func TestValidate(t *testing.T) {
	bad := []SamplerParams{{TopP: 1.5}, {MinP: -1}, {TopK: -2}, {RepeatPenalty: -1}, {Temperature: float32(math.NaN())}}
	for _, p := range bad {
		if p.Validate() == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	if err := (SamplerParams{Temperature: 0.8, TopP: 0.9}).Validate(); err != nil {
		t.Error(err)
	}
}

// Selecting the top k gives exactly what sorting the whole vocabulary and
// keeping k did, ties included.
func TestBestKMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, 2, 7, 100, 5000} {
		for _, k := range []int{1, 3, 40, n - 1} {
			if k < 1 || k > n {
				continue
			}
			s := NewSampler(SamplerParams{RepeatPenalty: 1.5, FrequencyPenalty: 0.5})
			logits, want := make([]float32, n), make([]candidate, n)
			var pen []penalty
			for i := range logits {
				// Few distinct values, so that ties are common; a
				// penalized token's may tie with others' too.
				logits[i] = float32(r.IntN(13) - 4)
				want[i] = candidate{id: i, logit: logits[i]}
				if r.IntN(8) == 0 {
					pen = append(pen, penalty{id: i, n: 1 + r.IntN(3)})
					want[i].logit = s.penalize(logits[i], pen[len(pen)-1].n)
				}
			}
			slices.SortFunc(want, byLogit)
			got := s.bestK(logits, pen, k)
			slices.SortFunc(got, byLogit)
			if !slices.Equal(got, want[:k]) {
				t.Fatalf("n=%d k=%d: %v, want %v", n, k, got, want[:k])
			}
		}
	}
}

// BenchmarkSample is a draw and a distribution (as speculative sampling
// takes a verified node's) with llama.cpp's default chain over a
// 32,000-token vocabulary.
func BenchmarkSample(b *testing.B) {
	x := benchLogits()
	history := make([]int, 200)
	for i := range history {
		history[i] = (i * 7919) % len(x)
	}
	s := NewSampler(SamplerParams{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, Seed: 1})
	out := make([]float32, len(x))
	b.Run("sample", func(b *testing.B) {
		for b.Loop() {
			s.Sample(x, history)
		}
	})
	b.Run("probs", func(b *testing.B) {
		for b.Loop() {
			s.Probs(out, x, history)
		}
	})
}
