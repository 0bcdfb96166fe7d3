package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
)

// HiddenTarget is a Target that can run a prompt without its output layer,
// handing out each token's final hidden state (after the final norm), as
// cpu.Target does. Embed uses it where the target has it: the output
// layer is most of a small model's prefill and an embedding needs none of
// it.
type HiddenTarget interface {
	Hidden(tokens []int, each func(pos int, hidden []float32) error) error
}

// Embed is the embedding of tokens on a fresh sequence of t: the mean of
// their final hidden states, after the final norm, L2-normalised. That is
// what llama.cpp's `llama-embedding --pooling mean --embd-normalize 2`
// gives for a decoder model (it pools the graph's "result_norm"), with
// causal attention as in generation. All of tokens are used, up to the
// whole context; ctx is checked at every position.
func Embed(ctx context.Context, t Target, tokens []int) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, errors.New("embed: no tokens")
	}
	if len(tokens) > t.Context() {
		return nil, fmt.Errorf("%w: %d tokens, context %d", ErrContextFull, len(tokens), t.Context())
	}
	for i, tok := range tokens {
		if tok < 0 || tok >= t.Vocab() {
			return nil, fmt.Errorf("token %d at %d is outside the vocabulary [0, %d)", tok, i, t.Vocab())
		}
	}
	if err := t.Truncate(0); err != nil {
		return nil, err
	}
	// Summed in float64 so that a long input's mean does not depend on
	// the order of its rows.
	var sum []float64
	add := func(_ int, h []float32) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if sum == nil {
			sum = make([]float64, len(h))
		}
		for i, v := range h {
			sum[i] += float64(v)
		}
		return nil
	}
	if err := hidden(ctx, t, tokens, add); err != nil {
		return nil, err
	}
	out := make([]float32, len(sum))
	for i, v := range sum {
		out[i] = float32(v / float64(len(tokens)))
	}
	if err := L2Normalize(out); err != nil {
		return nil, err
	}
	return out, nil
}

// hidden hands each token's final hidden state to each, through the
// target's HiddenTarget where it has one, else from the prefill's forward
// passes (a chunk at a time, ctx checked between them).
func hidden(ctx context.Context, t Target, tokens []int, each func(int, []float32) error) error {
	if ht, ok := t.(HiddenTarget); ok {
		return ht.Hidden(tokens, each)
	}
	_, hs, err := prefill(ctx, t, tokens, true)
	if err != nil {
		return err
	}
	for i, h := range hs {
		if err := each(i, h); err != nil {
			return err
		}
	}
	return nil
}

// L2Normalize scales v to unit Euclidean length in place, summing in
// float64 as llama.cpp's common_embd_normalize does. A zero vector stays
// zero; one holding NaN or Inf is ErrNotFinite.
func L2Normalize(v []float32) error {
	var ss float64
	for _, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return ErrNotFinite
		}
		ss += float64(x) * float64(x)
	}
	if ss == 0 {
		return nil
	}
	scale := 1 / math.Sqrt(ss)
	for i, x := range v {
		v[i] = float32(float64(x) * scale)
	}
	return nil
}
