package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Request is one generation.
type Request struct {
	Prompt    []int
	MaxTokens int // ≤ 0: until the end of the context
	Sampler   SamplerParams
	// Stop reports whether a token ends generation (end-of-generation
	// tokens); the stopping token is not emitted.
	Stop func(token int) bool
}

// Stats is what a generation measured.
type Stats struct {
	PromptTokens int
	GenTokens    int
	PromptTime   time.Duration
	GenTime      time.Duration
	StopReason   string // "stop", "length" or "cancelled"
}

// PromptTokensPerSec is prefill speed.
func (s Stats) PromptTokensPerSec() float64 { return rate(s.PromptTokens, s.PromptTime) }

// GenTokensPerSec is decode speed.
func (s Stats) GenTokensPerSec() float64 { return rate(s.GenTokens, s.GenTime) }

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// ErrContextFull is returned when the prompt alone does not fit.
var ErrContextFull = errors.New("prompt does not fit in the context")

// Generate runs req on a fresh sequence of t and calls emit for each new
// token. It stops at a stop token, MaxTokens, the end of the context, an
// error from emit, or when ctx is cancelled (checked before every token).
func Generate(ctx context.Context, t Target, req Request, emit func(token int) error) (st Stats, err error) {
	st.PromptTokens = len(req.Prompt)
	if err := req.Sampler.Validate(); err != nil {
		return st, err
	}
	if len(req.Prompt) == 0 {
		return st, errors.New("empty prompt")
	}
	if len(req.Prompt) >= t.Context() {
		return st, fmt.Errorf("%w: %d tokens, context %d", ErrContextFull, len(req.Prompt), t.Context())
	}
	if err := t.Truncate(0); err != nil {
		return st, err
	}
	start := time.Now()
	logits, err := t.Forward(req.Prompt)
	if err != nil {
		return st, err
	}
	st.PromptTime = time.Since(start)
	s := NewSampler(req.Sampler)
	history := append([]int(nil), req.Prompt...)
	max := req.MaxTokens
	if room := t.Context() - len(req.Prompt); max <= 0 || max > room {
		max = room
	}
	start = time.Now()
	defer func() { st.GenTime = time.Since(start) }()
	st.StopReason = "length"
	for st.GenTokens < max {
		if ctx.Err() != nil {
			st.StopReason = "cancelled"
			return st, ctx.Err()
		}
		tok := s.Sample(logits, history)
		if req.Stop != nil && req.Stop(tok) {
			st.StopReason = "stop"
			break
		}
		st.GenTokens++
		history = append(history, tok)
		if err := emit(tok); err != nil {
			return st, err
		}
		if st.GenTokens == max {
			break
		}
		if logits, err = t.Forward([]int{tok}); err != nil {
			return st, err
		}
	}
	return st, nil
}
