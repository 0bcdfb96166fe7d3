package engine

import (
	"context"
	"fmt"
	"time"

	"dovetail/engine/tree"
)

// speculation is the decode loop with a drafter, a round at a time: each
// round plans its tree, drafts it (or recalls a remembered chain),
// verifies it in one pass of the target, accepts what the target would
// have produced itself, accounts for it and emits it. A round the planner
// expects no draft to win is a plain decode step instead.
type speculation struct {
	ctx context.Context
	t   Target
	req Request
	s   *Sampler
	e   *emitter
	acc *acceptor
	st  *Stats

	// A round's time outside the forward and the draft (work), for the
	// planner: measured from one round's start to the next's.
	roundStart time.Time
	work       time.Duration
	// drafted: the last round was drafted by the drafter, which has then
	// read every committed position but that round's accepted ones.
	drafted bool

	r round // the round under way
}

// round is what one round's steps find out.
type round struct {
	root     int         // emitted, not yet run by the target
	p        tree.Params // the tree's shape
	tree     *tree.Tree
	recalled bool          // the tree is a remembered chain, not a draft
	caught   time.Duration // the drafter catching up, timed apart
	t0, t1   time.Time     // drafting began, verifying began

	nodes, parents []int       // the verified tree, root first
	logits, hidden [][]float32 // the target's, per verified node
	path           []int       // the accepted nodes, root first
	next           int         // the target's own token after them
}

// speculate runs rounds until generation ends. tok, already sampled
// from the logits row, is the root of the first round.
func speculate(ctx context.Context, t Target, req Request, s *Sampler, e *emitter, tok int, row []float32) error {
	sp := &speculation{ctx: ctx, t: t, req: req, s: s, e: e, acc: newAcceptor(s), st: e.st}
	for {
		if done, err := sp.begin(tok, row); done || err != nil {
			return err
		}
		plain, err := sp.plan(tok)
		if err != nil {
			return err
		}
		if plain {
			if tok, row, err = sp.plainStep(tok); err != nil {
				return err
			}
			continue
		}
		if err := sp.draft(); err != nil {
			return err
		}
		if err := sp.verify(); err != nil {
			return err
		}
		if err := sp.accept(); err != nil {
			return err
		}
		sp.account()
		if done, err := sp.emit(); done || err != nil {
			return err
		}
		r := &sp.r
		tok, row = r.next, r.logits[r.path[len(r.path)-1]]
	}
}

// begin starts a round: the planner is told what the last one cost
// beyond its forward and draft, and the root token is emitted.
func (sp *speculation) begin(root int, row []float32) (done bool, err error) {
	if pl := sp.req.Planner; pl != nil {
		now := time.Now()
		if !sp.roundStart.IsZero() {
			pl.ObserveOverhead(now.Sub(sp.roundStart) - sp.work)
		}
		sp.roundStart, sp.work = now, 0
	}
	sp.e.flush()
	if done, err := sp.e.push(root, FromTarget, row); done || err != nil {
		return true, err
	}
	if err := sp.ctx.Err(); err != nil {
		sp.st.StopReason = "cancelled"
		return true, err
	}
	return false, nil
}

// plan chooses the round's tree shape and, where the text memory
// remembers a continuation that beats both plain decoding and the
// planned draft, the chain to verify instead; plain says the round is a
// plain decode step.
func (sp *speculation) plan(root int) (plain bool, err error) {
	sp.r = round{root: root, p: sp.req.Tree, nodes: sp.r.nodes[:0], parents: sp.r.parents[:0]}
	r, pl := &sp.r, sp.req.Planner
	if pl != nil {
		var on bool
		r.p, on = pl.Plan()
		// A remembered continuation alone, when it beats both plain
		// decoding and the planned draft; not in a probe (a round the
		// plan does not expect to win), which keeps the draft's
		// acceptance measured.
		if bar := pl.Speedup(r.p); !on || bar > 1 {
			if r.tree, err = sp.recall(max(bar, 1)); err != nil {
				return false, err
			}
		}
		if !on && r.tree == nil {
			return true, nil
		}
	}
	r.p.Tokens = min(r.p.Tokens, sp.t.Context()-sp.t.Len()-1)
	r.recalled = r.tree != nil
	return false, nil
}

// plainStep runs the root alone: only it is committed, and a drafter
// reading features still gets the root's.
func (sp *speculation) plainStep(root int) (tok int, row []float32, err error) {
	t0 := time.Now()
	logits, hidden, err := sp.t.ForwardFeatures([]int{root})
	if err != nil {
		return 0, nil, err
	}
	tok, row = sp.s.Sample(logits, sp.e.history), logits
	sp.work = time.Since(t0)
	sp.req.Planner.ObserveTarget(1, sp.work)
	sp.req.Drafter.Accepted([]int{root}, hidden)
	sp.st.PlainSteps++
	sp.drafted = false
	return tok, row, nil
}

// draft has the drafter catch up on the positions committed since it
// last drafted, then draft the round's tree, unless the round verifies a
// recalled chain.
func (sp *speculation) draft() error {
	r := &sp.r
	if !r.recalled && !sp.drafted && r.p.Tokens > 0 {
		var err error
		if r.caught, err = sp.catchUp(); err != nil {
			return err
		}
	}
	r.t0 = time.Now()
	defer func() { r.t1 = time.Now() }()
	if r.recalled {
		sp.st.Recalled++
		return nil
	}
	r.tree = &tree.Tree{}
	if r.p.Tokens == 0 {
		return nil
	}
	var err error
	if r.tree, err = sp.req.Drafter.Draft(sp.e.history, r.p); err != nil {
		return err
	}
	return checkDraft(r.tree, r.p.Tokens, sp.t.Vocab())
}

// verify runs the root and the tree in one pass of the target.
func (sp *speculation) verify() error {
	r := &sp.r
	r.nodes = append(r.nodes, r.root)
	r.parents = append(r.parents, -1)
	for i, par := range r.tree.Parents {
		r.nodes = append(r.nodes, r.tree.Tokens[i])
		r.parents = append(r.parents, par+1)
	}
	var err error
	r.logits, r.hidden, err = sp.t.Extend(r.nodes, r.parents)
	return err
}

// accept follows the path the target would have produced itself and
// commits it; the planner is told what verifying took.
func (sp *speculation) accept() error {
	r := &sp.r
	r.path, r.next = sp.acc.accept(r.tree, r.logits, sp.e.history)
	if pl := sp.req.Planner; pl != nil {
		pl.ObserveTarget(len(r.nodes), time.Since(r.t1))
		sp.work = time.Since(r.t0) + r.caught
	}
	return sp.t.Commit(r.path)
}

// account counts the round in the statistics, and tells the drafter what
// was committed and the planner what the round achieved.
func (sp *speculation) account() {
	r, st := &sp.r, sp.st
	st.DraftTime += r.t1.Sub(r.t0) + r.caught
	sp.drafted = !r.recalled && r.p.Tokens > 0
	st.VerifyTime += time.Since(r.t1)
	st.Rounds++
	st.Accepted += len(r.path) - 1
	for len(st.DepthReached) < len(r.path)-1 {
		st.DepthReached = append(st.DepthReached, 0)
	}
	committed := make([]int, len(r.path))
	features := make([][]float32, len(r.path))
	for i, v := range r.path {
		committed[i], features[i] = r.nodes[v], r.hidden[v]
		if i > 0 {
			st.DepthReached[i-1]++
		}
	}
	sp.req.Drafter.Accepted(committed, features)
	if bd, ok := sp.req.Drafter.(BranchDrafter); ok {
		bd.Verified(r.nodes, r.parents, r.hidden, r.path)
	}
	switch pl := sp.req.Planner; {
	case pl == nil:
	case r.recalled:
		pl.ObserveRecall(r.tree.Len(), len(r.path)-1)
	default:
		depth := 0
		for _, d := range r.tree.Depths {
			depth = max(depth, d)
		}
		pl.Observe(r.p, depth, len(r.path)-1, r.t1.Sub(r.t0))
	}
}

// emit hands on the accepted draft tokens, each marked with where it came
// from.
func (sp *speculation) emit() (done bool, err error) {
	r := &sp.r
	for i, v := range r.path[1:] {
		from := FromDraft
		if r.recalled || r.tree.IsRecalled(v-1) {
			from = FromMemory
		}
		if done, err := sp.e.push(r.nodes[v], from, r.logits[r.path[i]]); done || err != nil {
			return true, err
		}
	}
	return false, nil
}

// catchUp has a CatchUpper read the positions committed since it last
// drafted, before a round's drafting is timed, and tells the planner what
// that took.
func (sp *speculation) catchUp() (time.Duration, error) {
	cu, ok := sp.req.Drafter.(CatchUpper)
	if !ok {
		return 0, nil
	}
	t0 := time.Now()
	n, err := cu.CatchUp(sp.e.history)
	d := time.Since(t0)
	if err == nil && sp.req.Planner != nil {
		sp.req.Planner.ObserveCatchUp(n, d)
	}
	return d, err
}

// recall is the chain a Recaller proposes, cut where the planner predicts
// the most speed, or nil when there is none or no part of it would beat
// the speedup bar (plain decoding's 1, or the planned draft's).
func (sp *speculation) recall(bar float64) (*tree.Tree, error) {
	rc, ok := sp.req.Drafter.(Recaller)
	if !ok {
		return nil, nil
	}
	t, p := sp.t, sp.req.Tree
	if p.Tokens = min(p.Tokens, t.Context()-t.Len()-1); p.Tokens < 1 {
		return nil, nil
	}
	chain := rc.Recall(sp.e.history, p)
	if err := checkDraft(chain, p.Tokens, t.Vocab()); err != nil {
		return nil, err
	}
	for i, par := range chain.Parents {
		if par != i-1 {
			return nil, fmt.Errorf("drafter recalled a tree that is not a chain (node %d's parent is %d)", i, par)
		}
	}
	k := sp.req.Planner.RecallLength(chain.Len(), bar)
	if k == 0 {
		return nil, nil
	}
	// Parents first: a chain's first k nodes are a chain.
	return &tree.Tree{Tokens: chain.Tokens[:k], Parents: chain.Parents[:k], Depths: chain.Depths[:k], Scores: chain.Scores[:k]}, nil
}

// checkDraft refuses a malformed tree from a drafter: a bug there must
// never turn into wrong output.
func checkDraft(t *tree.Tree, maxTokens, vocab int) error {
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
