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
	// Drafter, when set, proposes draft trees shaped by Tree that the
	// target verifies in one pass each (speculative decoding). The output
	// is the same as without it: token for token when greedy, in
	// distribution when sampling.
	Drafter Drafter
	Tree    TreeParams
	// Planner, when set, chooses the tree shape each round (Tree is then
	// only its starting point) and turns speculation off while it would
	// lose to plain decoding.
	Planner *Planner
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

// speculate is the decode loop with a drafter. tok, already sampled from
// the logits row, is the root of the first round.
func speculate(ctx context.Context, t Target, req Request, s *Sampler, e *emitter, tok int, row []float32) error {
	st := e.st
	acc := newAcceptor(s)
	var nodes, parents []int
	// A round's time outside the forward and the draft (work), for the
	// planner: measured from one round's start to the next's.
	var roundStart time.Time
	var work time.Duration
	// drafted: the last round was drafted by the drafter, which has then
	// read every committed position but that round's accepted ones.
	drafted := false
	for {
		if req.Planner != nil {
			now := time.Now()
			if !roundStart.IsZero() {
				req.Planner.ObserveOverhead(now.Sub(roundStart) - work)
			}
			roundStart, work = now, 0
		}
		e.flush()
		if done, err := e.push(tok, FromTarget, row); done || err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			st.StopReason = "cancelled"
			return err
		}
		// tok is the root: emitted, not yet run by the target.
		p := req.Tree
		var tree *Tree // drafted below, unless recalled here
		if req.Planner != nil {
			var on bool
			p, on = req.Planner.Plan()
			// A remembered continuation alone, when it beats both plain
			// decoding and the planned draft; not in a probe (a round the
			// plan does not expect to win), which keeps the draft's
			// acceptance measured.
			if bar := req.Planner.Speedup(p); !on || bar > 1 {
				var err error
				if tree, err = recall(t, req, e.history, max(bar, 1)); err != nil {
					return err
				}
			}
			if !on && tree == nil {
				// A round with no draft: only the root is committed, and a
				// drafter reading features still gets the root's.
				root, t0 := tok, time.Now()
				logits, hidden, err := t.ForwardFeatures([]int{root})
				if err != nil {
					return err
				}
				tok, row = s.Sample(logits, e.history), logits
				work = time.Since(t0)
				req.Planner.ObserveTarget(1, work)
				req.Drafter.Accepted([]int{root}, hidden)
				st.PlainSteps++
				drafted = false
				continue
			}
		}
		p.Tokens = min(p.Tokens, t.Context()-t.Len()-1)
		recalled := tree != nil
		var caught time.Duration
		if !recalled && !drafted && p.Tokens > 0 {
			var err error
			if caught, err = catchUp(req, e.history); err != nil {
				return err
			}
		}
		t0 := time.Now()
		if recalled {
			st.Recalled++
		} else {
			tree = &Tree{}
			if p.Tokens > 0 {
				var err error
				if tree, err = req.Drafter.Draft(e.history, p); err != nil {
					return err
				}
				if err := checkDraft(tree, p.Tokens, t.Vocab()); err != nil {
					return err
				}
			}
		}
		t1 := time.Now()
		nodes = append(nodes[:0], tok)
		parents = append(parents[:0], -1)
		for i, par := range tree.Parents {
			nodes = append(nodes, tree.Tokens[i])
			parents = append(parents, par+1)
		}
		logits, hidden, err := t.Extend(nodes, parents)
		if err != nil {
			return err
		}
		path, next := acc.accept(tree, logits, e.history)
		if req.Planner != nil {
			req.Planner.ObserveTarget(len(nodes), time.Since(t1))
			work = time.Since(t0) + caught
		}
		if err := t.Commit(path); err != nil {
			return err
		}
		st.DraftTime += t1.Sub(t0) + caught
		drafted = !recalled && p.Tokens > 0
		st.VerifyTime += time.Since(t1)
		st.Rounds++
		st.Accepted += len(path) - 1
		for len(st.DepthReached) < len(path)-1 {
			st.DepthReached = append(st.DepthReached, 0)
		}
		committed := make([]int, len(path))
		features := make([][]float32, len(path))
		for i, v := range path {
			committed[i], features[i] = nodes[v], hidden[v]
			if i > 0 {
				st.DepthReached[i-1]++
			}
		}
		req.Drafter.Accepted(committed, features)
		if bd, ok := req.Drafter.(BranchDrafter); ok {
			bd.Verified(nodes, parents, hidden, path)
		}
		switch {
		case req.Planner == nil:
		case recalled:
			req.Planner.ObserveRecall(tree.Len(), len(path)-1)
		default:
			depth := 0
			for _, d := range tree.Depths {
				depth = max(depth, d)
			}
			req.Planner.Observe(p, depth, len(path)-1, t1.Sub(t0))
		}
		for i, v := range path[1:] {
			from := FromDraft
			if recalled || tree.recalled(v-1) {
				from = FromMemory
			}
			if done, err := e.push(nodes[v], from, logits[path[i]]); done || err != nil {
				return err
			}
		}
		tok, row = next, logits[path[len(path)-1]]
	}
}

// catchUp has a CatchUpper read the positions committed since it last
// drafted, before a round's drafting is timed, and tells the planner what
// that took.
func catchUp(req Request, history []int) (time.Duration, error) {
	cu, ok := req.Drafter.(CatchUpper)
	if !ok {
		return 0, nil
	}
	t0 := time.Now()
	n, err := cu.CatchUp(history)
	d := time.Since(t0)
	if err == nil && req.Planner != nil {
		req.Planner.ObserveCatchUp(n, d)
	}
	return d, err
}

// recall is the chain a Recaller proposes, cut where the planner predicts
// the most speed, or nil when there is none or no part of it would beat
// the speedup bar (plain decoding's 1, or the planned draft's).
func recall(t Target, req Request, history []int, bar float64) (*Tree, error) {
	rc, ok := req.Drafter.(Recaller)
	if !ok {
		return nil, nil
	}
	p := req.Tree
	if p.Tokens = min(p.Tokens, t.Context()-t.Len()-1); p.Tokens < 1 {
		return nil, nil
	}
	tree := rc.Recall(history, p)
	if err := checkDraft(tree, p.Tokens, t.Vocab()); err != nil {
		return nil, err
	}
	for i, par := range tree.Parents {
		if par != i-1 {
			return nil, fmt.Errorf("drafter recalled a tree that is not a chain (node %d's parent is %d)", i, par)
		}
	}
	k := req.Planner.RecallLength(tree.Len(), bar)
	if k == 0 {
		return nil, nil
	}
	// Parents first: a chain's first k nodes are a chain.
	return &Tree{Tokens: tree.Tokens[:k], Parents: tree.Parents[:k], Depths: tree.Depths[:k], Scores: tree.Scores[:k]}, nil
}

// checkDraft refuses a malformed tree from a drafter: a bug there must
// never turn into wrong output.
func checkDraft(t *Tree, maxTokens, vocab int) error {
	if t.Len() > maxTokens {
		return fmt.Errorf("drafter returned %d nodes, more than the %d asked for", t.Len(), maxTokens)
	}
	if len(t.Parents) != t.Len() || len(t.Depths) != t.Len() {
		return fmt.Errorf("drafter returned a tree with %d tokens, %d parents, %d depths", t.Len(), len(t.Parents), len(t.Depths))
	}
	for i, tok := range t.Tokens {
		if tok < 0 || tok >= vocab {
			return fmt.Errorf("drafter proposed token %d outside the vocabulary at node %d", tok, i)
		}
	}
	if err := t.Check(); err != nil {
		return fmt.Errorf("drafter returned a malformed tree: %w", err)
	}
	return nil
}
