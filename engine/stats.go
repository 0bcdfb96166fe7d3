package engine

import "time"

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
