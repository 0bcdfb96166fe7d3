package engine_test

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"dovetail/engine"
	"dovetail/engine/enginetest"
	"dovetail/engine/tree"
)

// poisoned is a Markov target whose logits turn bad once its sequence
// holds from tokens: v at index at of every row from then on.
type poisoned struct {
	*enginetest.Markov
	from, at int
	v        float32
}

func (p *poisoned) bad(row []float32, pos int) []float32 {
	if pos < p.from {
		return row
	}
	row = slices.Clone(row)
	row[p.at] = p.v
	return row
}

func (p *poisoned) Forward(tokens []int) ([]float32, error) {
	lg, err := p.Markov.Forward(tokens)
	return p.bad(lg, p.Len()), err
}

func (p *poisoned) ForwardFeatures(tokens []int) ([]float32, [][]float32, error) {
	lg, hid, err := p.Markov.ForwardFeatures(tokens)
	return p.bad(lg, p.Len()), hid, err
}

// Extend's node i sits at Len() + its depth in the tree.
func (p *poisoned) Extend(tokens, parents []int) ([][]float32, [][]float32, error) {
	outs, hid, err := p.Markov.Extend(tokens, parents)
	depth := make([]int, len(tokens))
	for i, par := range parents {
		if par >= 0 {
			depth[i] = depth[par] + 1
		}
		outs[i] = p.bad(outs[i], p.Len()+depth[i]+1)
	}
	return outs, hid, err
}

// A forward pass whose logits hold NaN or ±Inf stops generation with
// ErrNotFinite, plain or speculative, greedy or sampling, whether the bad
// value is the prompt's row or a later one, the argmax or not; no token is
// emitted from a bad row.
func TestNotFiniteLogitsStop(t *testing.T) {
	prompt := []int{1, 2, 3}
	for _, c := range []struct {
		name   string
		from   int
		v      float32
		at     int
		spec   bool
		greedy bool
	}{
		{"NaN from the prompt, plain", 3, float32(math.NaN()), 0, false, true},
		{"NaN later, plain sampling", 8, float32(math.NaN()), 511, false, false},
		{"+Inf later, speculative", 9, float32(math.Inf(1)), 7, true, true},
		{"NaN later, speculative sampling", 10, float32(math.NaN()), 300, true, false},
		{"-Inf from the prompt, speculative", 3, float32(math.Inf(-1)), 5, true, true},
	} {
		target := &poisoned{Markov: enginetest.NewMarkov(512, 1, 3), from: c.from, at: c.at, v: c.v}
		req := engine.Request{Prompt: prompt, MaxTokens: 40, Sampler: engine.SamplerParams{Temperature: 0.8, TopK: 40, TopP: 0.95, Seed: 3}}
		if c.greedy {
			req.Sampler = engine.SamplerParams{}
		}
		if c.spec {
			req.Drafter = &garbage{rng: rand.New(rand.NewPCG(1, 2))}
			req.Tree = tree.Params{TopK: 4, Depth: 3, Tokens: 8}
		}
		var got []int
		_, err := engine.Generate(context.Background(), target, req, func(tok int) error { got = append(got, tok); return nil })
		if !errors.Is(err, engine.ErrNotFinite) {
			t.Errorf("%s: %v", c.name, err)
		}
		// The row at position p gives the token at p; tokens before from
		// are fine, the first bad row emits none.
		if want := c.from - len(prompt); len(got) != want {
			t.Errorf("%s: %d tokens emitted, want %d", c.name, len(got), want)
		}
	}
}
