// Package engine generates text with a target and, when given one, a
// drafter: Generate runs a request's prompt, then plain decode steps or
// speculative rounds (round.go: plan, draft, verify, accept, emit,
// account) until it stops, with output exactly what the target alone
// would produce. It sees the target and the drafter through interfaces
// (Target, Drafter) and imports no device; trees (engine/tree), the
// planner (engine/plan), the drafters (engine/drafters) and online
// adaptation (engine/adapt) are packages of their own.
package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"dovetail/engine/plan"
	"dovetail/engine/tree"
)

// Request is one generation.
type Request struct {
	Prompt    []int
	MaxTokens int // ≤ 0: until the end of the context
	Sampler   SamplerParams
	// Stop reports whether a token ends generation (end-of-generation
	// tokens); the stopping token is not emitted.
	Stop func(token int) bool
	// Drafter, when set, proposes draft trees shaped by Tree that the
	// target verifies in one pass each (speculative decoding). The output
	// is the same as without it: token for token when greedy, in
	// distribution when sampling.
	Drafter Drafter
	Tree    tree.Params
	// Planner, when set, chooses the tree shape each round (Tree is then
	// only its starting point) and turns speculation off while it would
	// lose to plain decoding.
	Planner *plan.Planner
	// OnRound, when set, is called after each round's tokens were
	// emitted: what a live view shows of speculation as it happens.
	OnRound func(Round)
	// OnLogprob, when set, is called with each token's Logprob just
	// before the token is emitted, with TopLogprobs alternatives.
	OnLogprob   func(Logprob)
	TopLogprobs int
}

// ErrContextFull is returned when the prompt alone does not fit.
var ErrContextFull = errors.New("prompt does not fit in the context")

// Generate runs req on a fresh sequence of t and calls emit for each new
// token. It stops at a stop token, MaxTokens, the end of the context, an
// error from emit, or when ctx is cancelled (checked before every token or
// round).
func Generate(ctx context.Context, t Target, req Request, emit func(token int) error) (st Stats, err error) {
	st.PromptTokens = len(req.Prompt)
	if err := req.Sampler.Validate(); err != nil {
		return st, err
	}
	if req.Drafter != nil {
		if err := req.Tree.Validate(); err != nil {
			return st, err
		}
	}
	if len(req.Prompt) == 0 {
		return st, errors.New("empty prompt")
	}
	if len(req.Prompt) >= t.Context() {
		return st, fmt.Errorf("%w: %d tokens, context %d", ErrContextFull, len(req.Prompt), t.Context())
	}
	for i, tok := range req.Prompt {
		if tok < 0 || tok >= t.Vocab() {
			return st, fmt.Errorf("prompt token %d at %d is outside the vocabulary [0, %d)", tok, i, t.Vocab())
		}
	}
	if err := t.Truncate(0); err != nil {
		return st, err
	}
	if req.Drafter != nil {
		req.Drafter.Reset()
		defer req.Drafter.Finish()
		if cd, ok := req.Drafter.(ContextDrafter); ok {
			cd.BindContext(ctx)
			defer cd.BindContext(nil)
		}
	}
	start := time.Now()
	fd, features := req.Drafter.(FeatureDrafter)
	logits, hidden, err := prefill(ctx, t, req.Prompt, features)
	if err != nil {
		if ctx.Err() != nil {
			st.StopReason = "cancelled"
		}
		return st, err
	}
	if features {
		fd.Prefilled(req.Prompt, hidden)
	}
	st.PromptTime = time.Since(start)
	start = time.Now()
	defer func() {
		st.GenTime = time.Since(start)
		st.DraftVersion = versionOf(req.Drafter)
	}()

	s := NewSampler(req.Sampler)
	e := &emitter{st: &st, stop: req.Stop, emit: emit, max: req.MaxTokens,
		history: append(make([]int, 0, len(req.Prompt)+256), req.Prompt...),
		onRound: req.OnRound, onLogprob: req.OnLogprob, topLP: max(req.TopLogprobs, 0), drafter: req.Drafter, start: start}
	defer e.flush()
	if room := t.Context() - len(req.Prompt); e.max <= 0 || e.max > room {
		e.max = room
	}
	tok := s.Sample(logits, e.history)
	if req.Drafter == nil {
		for {
			e.flush()
			if done, err := e.push(tok, FromTarget, logits); done || err != nil {
				return st, err
			}
			if err := ctx.Err(); err != nil {
				st.StopReason = "cancelled"
				return st, err
			}
			if logits, err = t.Forward([]int{tok}); err != nil {
				return st, err
			}
			tok = s.Sample(logits, e.history)
		}
	}
	err = speculate(ctx, t, req, s, e, tok, logits)
	if err != nil && ctx.Err() != nil {
		st.StopReason = "cancelled" // also where a drafter saw it first
	}
	return st, err
}
