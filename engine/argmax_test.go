package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// argmaxRef is one running maximum: the first index of the largest value
// above -Inf, or -1.
func argmaxRef(x []float32) int {
	best, bestV := -1, float32(math.Inf(-1))
	for i, v := range x {
		if v > bestV {
			best, bestV = i, v
		}
	}
	return best
}

// tiedLogits draws n values from a few, so that ties, -Inf and NaN are
// common; half the slices have no +Inf, so that their largest is finite.
func tiedLogits(r *rand.Rand, n int) []float32 {
	vals := []float32{-2, 0, 0.5, 3, float32(math.Inf(-1)), float32(math.NaN()), float32(math.Inf(1))}
	vals = vals[:len(vals)-r.IntN(2)]
	x := make([]float32, n)
	for i := range x {
		x[i] = vals[r.IntN(len(vals))]
	}
	return x
}

func TestArgmaxFirst(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for n := 0; n < 40; n++ {
		for range 200 {
			x := tiedLogits(r, n)
			i, v := argmaxFirst(x)
			want := argmaxRef(x)
			if i != want {
				t.Fatalf("argmaxFirst(%v) = %d, want %d", x, i, want)
			}
			if i >= 0 && v != x[i] || i < 0 && !math.IsInf(float64(v), -1) {
				t.Fatalf("argmaxFirst(%v) = %d, value %v", x, i, v)
			}
		}
	}
}

// TestArgmaxPenalized checks the greedy pick with penalties against
// applying them to every logit and taking one running maximum, as
// llama.cpp does.
func TestArgmaxPenalized(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, p := range []SamplerParams{{RepeatPenalty: 1.3}, {RepeatPenalty: 0.7}, {FrequencyPenalty: 0.4, PresencePenalty: -0.3},
		{RepeatPenalty: 1.2, FrequencyPenalty: -0.5, PresencePenalty: 0.5}} {
		p.RepeatLastN = 8
		s := NewSampler(p)
		for n := 1; n < 40; n++ {
			for range 100 {
				x := tiedLogits(r, n)
				history := make([]int, r.IntN(12))
				for i := range history {
					history[i] = r.IntN(n)
				}
				count := map[int]int{}
				for _, tok := range history[max(0, len(history)-8):] {
					count[tok]++
				}
				y := make([]float32, n)
				for i, v := range x {
					y[i] = v
					if count[i] > 0 {
						y[i] = s.penalize(v, count[i])
					}
				}
				want := max(argmaxRef(y), 0)
				if got := s.Sample(x, history); got != want {
					t.Fatalf("%+v, logits %v, history %v: picked %d, want %d", p, x, history, got, want)
				}
			}
		}
	}
}

func BenchmarkArgmaxFirst(b *testing.B) {
	x := benchLogits()
	for b.Loop() {
		argmaxFirst(x)
	}
}

// BenchmarkGreedy is a greedy pick without a repetition penalty and with
// ollama's default one over the last 64 tokens.
func BenchmarkGreedy(b *testing.B) {
	x := benchLogits()
	history := make([]int, 200)
	for i := range history {
		history[i] = (i * 7919) % len(x)
	}
	for _, penalty := range []float32{1, 1.1} {
		s := NewSampler(SamplerParams{RepeatPenalty: penalty})
		b.Run(fmt.Sprintf("penalty=%v", penalty), func(b *testing.B) {
			for b.Loop() {
				s.Sample(x, history)
			}
		})
	}
}

// benchLogits is a 32,000-token vocabulary's logits.
func benchLogits() []float32 {
	r := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, 32000)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}
