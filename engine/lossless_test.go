package engine_test

import (
	"context"
	"math"
	"testing"

	"dovetail/cpu"
	"dovetail/engine"
	"dovetail/engine/drafters"
	"dovetail/engine/enginetest"
	"dovetail/engine/tree"
)

// exactJoint is the exact distribution of the first n tokens generated
// after prompt, under the processed distribution of params, computed by
// walking every sequence of nonzero probability.
func exactJoint(t engine.Target, prompt []int, params engine.SamplerParams, n int) map[[3]int]float64 {
	s := engine.NewSampler(params)
	out := map[[3]int]float64{}
	probs := make([]float32, t.Vocab())
	var walk func(seq []int, p float64)
	walk = func(seq []int, p float64) {
		if len(seq) == len(prompt)+n {
			var key [3]int
			copy(key[:], seq[len(prompt):])
			out[key] += p
			return
		}
		t.Truncate(0)
		logits, _ := t.Forward(seq)
		s.Probs(probs, logits, seq)
		local := append([]float32(nil), probs...)
		for tok, q := range local {
			if q > 0 {
				walk(append(seq[:len(seq):len(seq)], tok), p*float64(q))
			}
		}
	}
	walk(prompt, 1)
	return out
}

// tvBound is a bound on the total-variation distance between an empirical
// distribution of N samples and the true p, exceeded with probability below
// 1e-6: E[TV] ≤ ½ Σ sqrt(p(1−p)/N), and TV moves by at most 1/N per sample,
// so by McDiarmid P(TV > E + t) ≤ exp(−2Nt²).
func tvBound(p map[[3]int]float64, n int) float64 {
	var e float64
	for _, q := range p {
		e += math.Sqrt(q * (1 - q) / float64(n))
	}
	return e/2 + math.Sqrt(math.Log(1e6)/(2*float64(n)))
}

func tv(p map[[3]int]float64, counts map[[3]int]int, n int) float64 {
	var d float64
	for k, q := range p {
		d += math.Abs(q - float64(counts[k])/float64(n))
	}
	for k, c := range counts {
		if _, ok := p[k]; !ok {
			d += float64(c) / float64(n)
		}
	}
	return d / 2
}

func sampleFirst3(t *testing.T, target engine.Target, req engine.Request, n int) map[[3]int]int {
	counts := map[[3]int]int{}
	for i := range n {
		req.Sampler.Seed = uint64(i)
		var seq []int
		_, err := engine.Generate(context.Background(), target, req, func(tok int) error {
			seq = append(seq, tok)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(seq) != 3 {
			t.Fatalf("generated %v", seq)
		}
		counts[[3]int{seq[0], seq[1], seq[2]}]++
	}
	return counts
}

// Speculative sampling is lossless: the first 3 tokens have exactly the
// target's distribution, though the draft model disagrees with it.
func TestSpeculativeSamplingIsLosslessMarkov(t *testing.T) {
	const n = 40000
	target := enginetest.NewMarkov(12, 1, 2)
	draft := enginetest.NewMarkov(12, 2, 2) // a different model: many rejections
	prompt := []int{3, 5}
	for _, params := range []engine.SamplerParams{{Temperature: 0.7, TopP: 0.9}, {Temperature: 1, TopP: 0.9}} {
		exact := exactJoint(target, prompt, params, 3)
		req := engine.Request{Prompt: prompt, MaxTokens: 3, Sampler: params,
			Drafter: drafters.NewModel(draft), Tree: tree.Params{TopK: 3, Depth: 2, Tokens: 6}}
		counts := sampleFirst3(t, target, req, n)
		d, bound := tv(exact, counts, n), tvBound(exact, n)
		t.Logf("T=%.1f: %d outcomes, TV %.4f, bound %.4f", params.Temperature, len(exact), d, bound)
		if d > bound {
			t.Errorf("T=%.1f: total variation %.4f > %.4f: not the target's distribution", params.Temperature, d, bound)
		}
		// The test can fail: the draft's own distribution is far outside.
		if wrong := tv(exactJoint(draft, prompt, params, 3), counts, n); wrong < 3*bound {
			t.Errorf("T=%.1f: the draft's distribution is within %.4f: the test cannot tell them apart", params.Temperature, wrong)
		}
	}
}

// The same on a real test model: stories260K drafted by its Q8_0 twin,
// 20,000 seeded samples per temperature, as the issue asks.
func TestSpeculativeSamplingIsLosslessModel(t *testing.T) {
	const n = 20000
	m := enginetest.Load(t, "stories260K-f32.gguf")
	defer m.Close()
	dm := enginetest.Load(t, "stories260K-Q8_0-mixed.gguf")
	defer dm.Close()
	target := cpu.NewTarget(m, enginetest.Pool, 64)
	draft := drafters.NewModel(cpu.NewTarget(dm, enginetest.Pool, 64))
	prompt := []int{1, 317, 269, 274, 287} // "Lily and Tom went": 162 three-token continuations at T=0.7, top-p 0.9
	for _, params := range []engine.SamplerParams{{Temperature: 0.7, TopP: 0.9}, {Temperature: 1, TopP: 0.9}} {
		exact := exactJoint(target, prompt, params, 3)
		req := engine.Request{Prompt: prompt, MaxTokens: 3, Sampler: params,
			Drafter: draft, Tree: tree.Params{TopK: 3, Depth: 2, Tokens: 6}}
		counts := sampleFirst3(t, target, req, n)
		d, bound := tv(exact, counts, n), tvBound(exact, n)
		t.Logf("T=%.1f: %d outcomes, TV %.4f, bound %.4f", params.Temperature, len(exact), d, bound)
		if d > bound {
			t.Errorf("T=%.1f: total variation %.4f > %.4f: not the target's distribution", params.Temperature, d, bound)
		}
		// The test can fail: the draft model's distribution is measurably other.
		if wrong := tv(exactJoint(cpu.NewTarget(dm, enginetest.Pool, 64), prompt, params, 3), counts, n); wrong < bound {
			t.Logf("T=%.1f: the Q8_0 twin's distribution is within %.4f (twins are close)", params.Temperature, wrong)
		}
	}
}
