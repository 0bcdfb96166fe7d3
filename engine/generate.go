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

// Source says where an emitted token came from.
type Source uint8

const (
	// FromTarget is the target's own token: the first of every round
	// (the bonus token of the round before, or a plain decode step's).
	FromTarget Source = iota
	// FromDraft is a token the draft model proposed and the target
	// accepted.
	FromDraft
	// FromMemory is a token the text memory recalled and the target
	// accepted.
	FromMemory
)

func (s Source) String() string {
	switch s {
	case FromDraft:
		return "draft"
	case FromMemory:
		return "memory"
	}
	return "target"
}

// Round is what one round emitted: the target's token, then the draft
// tokens it accepted after it. Slices are valid during the call only.
type Round struct {
	Tokens  []int
	Sources []Source // one per token
	// So far in this generation: tokens per speculative round (0 before
	// the first), generation speed, and the draft's weights' version.
	Tau          float64
	TokensPerSec float64
	DraftVersion int
}

// Stats is what a generation measured.
type Stats struct {
	PromptTokens int
	GenTokens    int
	PromptTime   time.Duration
	GenTime      time.Duration
	StopReason   string // "stop", "length" or "cancelled"

	// Speculative decoding only.
	Rounds       int
	PlainSteps   int   // decode steps without a draft while the planner had speculation off
	Recalled     int   // rounds (among Rounds) that verified only a remembered continuation, speculation off
	Accepted     int   // draft tokens accepted
	DepthReached []int // [d-1]: rounds whose accepted path reached depth d
	DraftTime    time.Duration
	VerifyTime   time.Duration
	// DraftVersion is the version of the draft's weights when generation
	// ended, for drafters whose weights change (a Version method); else 0.
	DraftVersion int
}

// PromptTokensPerSec is prefill speed.
func (s Stats) PromptTokensPerSec() float64 { return rate(s.PromptTokens, s.PromptTime) }

// GenTokensPerSec is decode speed.
func (s Stats) GenTokensPerSec() float64 { return rate(s.GenTokens, s.GenTime) }

// Tau is the mean number of tokens a round produced: accepted draft tokens
// plus the target's own next token.
func (s Stats) Tau() float64 {
	if s.Rounds == 0 {
		return 0
	}
	return float64(s.Accepted+s.Rounds) / float64(s.Rounds)
}

// AcceptanceByDepth is, for each depth d = 1, 2, …, the share of rounds
// whose accepted path reached depth d.
func (s Stats) AcceptanceByDepth() []float64 {
	out := make([]float64, len(s.DepthReached))
	for i, n := range s.DepthReached {
		out[i] = float64(n) / float64(max(1, s.Rounds))
	}
	return out
}

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// ErrContextFull is returned when the prompt alone does not fit.
var ErrContextFull = errors.New("prompt does not fit in the context")

// emitter hands tokens to the caller and decides when generation ends.
type emitter struct {
	st      *Stats
	stop    func(int) bool
	emit    func(int) error
	max     int
	history []int // prompt and generated tokens

	onRound   func(Round)
	onLogprob func(Logprob)
	topLP     int
	drafter   Drafter
	start     time.Time // of generation
	round     Round     // emitted since the last flush
}

// push emits tok, chosen from the logits row, unless it stops
// generation; done reports the end.
func (e *emitter) push(tok int, from Source, row []float32) (done bool, err error) {
	if e.stop != nil && e.stop(tok) {
		e.st.StopReason = "stop"
		return true, nil
	}
	e.st.GenTokens++
	e.history = append(e.history, tok)
	if e.onLogprob != nil {
		e.onLogprob(logprobOf(row, tok, e.topLP))
	}
	if err := e.emit(tok); err != nil {
		return true, err
	}
	if e.onRound != nil {
		e.round.Tokens = append(e.round.Tokens, tok)
		e.round.Sources = append(e.round.Sources, from)
	}
	if e.st.GenTokens >= e.max {
		e.st.StopReason = "length"
		return true, nil
	}
	return false, nil
}

// flush reports the tokens emitted since the last flush as a round.
func (e *emitter) flush() {
	if e.onRound == nil || len(e.round.Tokens) == 0 {
		return
	}
	r := e.round
	r.Tau = e.st.Tau()
	r.TokensPerSec = rate(e.st.GenTokens, time.Since(e.start))
	r.DraftVersion = versionOf(e.drafter)
	e.onRound(r)
	e.round.Tokens, e.round.Sources = e.round.Tokens[:0], e.round.Sources[:0]
}

// versionOf is the version of a drafter's weights, for drafters whose
// weights change (a Version method); else 0.
func versionOf(d Drafter) int {
	if v, ok := d.(interface{ Version() int }); ok {
		return v.Version()
	}
	return 0
}

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
	}
	start := time.Now()
	var logits []float32
	if fd, ok := req.Drafter.(FeatureDrafter); ok {
		var hidden [][]float32
		if logits, hidden, err = t.ForwardFeatures(req.Prompt); err != nil {
			return st, err
		}
		fd.Prefilled(req.Prompt, hidden)
	} else if logits, err = t.Forward(req.Prompt); err != nil {
		return st, err
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
	return st, speculate(ctx, t, req, s, e, tok, logits)
}
