package topk

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

func logitsFor(p ...float64) []float32 {
	l := make([]float32, len(p))
	for i, v := range p {
		l[i] = float32(math.Log(v))
	}
	return l
}

func TestLogProbs(t *testing.T) {
	got := LogProbs(nil, logitsFor(0.1, 0.5, 0.15, 0.25), 3, 1)
	want := []int{1, 3, 2}
	for i, c := range got {
		if c.Token != want[i] {
			t.Fatalf("top-3 = %v, want tokens %v", got, want)
		}
	}
	if math.Abs(got[0].LogP-math.Log(0.5)) > 1e-6 {
		t.Errorf("log p = %v, want %v", got[0].LogP, math.Log(0.5))
	}
	// Scale 2 squares the probabilities before normalizing.
	got = LogProbs(nil, logitsFor(0.1, 0.5, 0.15, 0.25), 1, 2)
	z := 0.01 + 0.25 + 0.0225 + 0.0625
	if math.Abs(got[0].LogP-math.Log(0.25/z)) > 1e-6 {
		t.Errorf("scaled log p = %v, want %v", got[0].LogP, math.Log(0.25/z))
	}
}

// Against a full sort on random logits with ties (rounded values): the
// same tokens in the same order, appended after what dst held.
func TestLogProbsMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		v := 1 + rng.IntN(300)
		k := 1 + rng.IntN(20)
		l := make([]float32, v)
		for i := range l {
			l[i] = float32(math.Round(rng.NormFloat64() * 3))
		}
		order := make([]int, v)
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return l[order[a]] > l[order[b]] })
		prefix := []Choice{{Token: -7}}
		got := LogProbs(slices.Clip(prefix), l, k, 1)
		if got[0].Token != -7 || len(got) != 1+min(k, v) {
			t.Fatalf("trial %d: %d choices after the prefix %v, want %d", trial, len(got)-1, got[0], min(k, v))
		}
		for i, c := range got[1:] {
			if c.Token != order[i] {
				t.Fatalf("trial %d: choice %d is token %d, want %d", trial, i, c.Token, order[i])
			}
		}
		var z float64
		for _, x := range l {
			z += math.Exp(float64(x))
		}
		if want := float64(l[order[0]]) - math.Log(z); math.Abs(got[1].LogP-want) > 1e-5 {
			t.Fatalf("trial %d: log p %v, want %v", trial, got[1].LogP, want)
		}
	}
}
