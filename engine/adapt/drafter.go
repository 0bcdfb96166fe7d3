package adapt

import (
	"fmt"

	"dovetail/engine/drafters"
	"dovetail/engine/tree"
)

// Drafter is a DGF drafter whose sequence feeds an Adapter: it
// records the positions the target committed with their features, and
// reports the τ of every drafted round. In per-request mode it also takes
// a gradient step on the request's own text after every round.
type Drafter struct {
	*drafters.DGF
	a       *Adapter
	seq     uint64
	active  bool
	drafted bool
	// Per-request mode: the request's committed positions.
	toks  []int
	feats [][]float32
	// The number of the round's first committed position in the records,
	// if they were recorded: where its rejected nodes hang.
	first    uint64
	recorded bool
	// The text memory: this sequence's text so far, and its own index.
	text []int
	own  *TextMemory
}

// Prefilled starts a sequence with the prompt's positions.
func (d *Drafter) Prefilled(prompt []int, features [][]float32) {
	d.finish()
	d.seq, d.active = d.a.begin(), true
	d.DGF.Prefilled(prompt, features)
	d.recorded = false
	d.a.record(&d.seq, prompt, features)
	d.keep(prompt, features)
	d.remember(prompt)
}

// Draft drafts a tree, noting whether there is one.
func (d *Drafter) Draft(ctx []int, p tree.Params) (*tree.Tree, error) {
	t, err := d.DGF.Draft(ctx, p)
	if err == nil && d.a.mem != nil {
		t = t.Graft(d.recall(ctx, p.Tokens), p.Tokens)
	}
	d.drafted = err == nil && t.Len() > 0
	return t, err
}

// Recall is the text memory's proposal alone, as a chain below the root:
// what a round costs when the draft model does not run (Recaller).
func (d *Drafter) Recall(ctx []int, p tree.Params) *tree.Tree {
	if d.a.mem == nil {
		return &tree.Tree{}
	}
	return (&tree.Tree{}).Graft(d.recall(ctx, p.Tokens), p.Tokens)
}

// recall is what the text memory proposes after ctx, at most limit
// tokens: the continuation of the longer remembered suffix, in finished
// requests or earlier in this one (the more recent on a tie).
//
// A continuation is trusted for up to twice the length of the suffix that
// matched (SuffixDecoding's α = 2), beyond the tree's depth if need be: the
// longest rule that did not lose τ anywhere (docs/measurements/adaptation.md,
// "Continuation length" and "A text memory of verified text").
func (d *Drafter) recall(ctx []int, limit int) []int {
	chain, n := d.a.mem.Lookup(ctx, limit)
	if d.own != nil {
		if own, on := d.own.Lookup(ctx, limit); own != nil && on >= n {
			chain, n = own, on
		}
	}
	return chain[:min(len(chain), 2*n)]
}

// remember adds committed tokens to the sequence's text.
func (d *Drafter) remember(tokens []int) {
	if d.a.mem == nil {
		return
	}
	if d.own == nil {
		d.own = NewTextMemory(ownMemoryTokens)
	}
	d.own.Append(tokens)
	d.text = append(d.text, tokens...)
}

// ownMemoryTokens bounds a sequence's own text memory: longer sequences
// are looked up in their newest part.
const ownMemoryTokens = 4096

// Accepted records the round's committed positions.
func (d *Drafter) Accepted(tokens []int, features [][]float32) {
	d.DGF.Accepted(tokens, features)
	d.first, d.recorded = d.a.record(&d.seq, tokens, features)
	d.keep(tokens, features)
	d.remember(tokens)
	if d.drafted {
		d.a.observe(float64(len(tokens)))
		d.drafted = false
		d.step()
	}
}

// Verified keeps the round's rejected nodes (see Records.AppendBranches)
// when its committed positions were recorded.
func (d *Drafter) Verified(nodes, parents []int, features [][]float32, path []int) {
	if d.recorded {
		d.a.rec.AppendBranches(d.first, nodes, parents, features, path)
		d.recorded = false
	}
}

// Reset ends the sequence.
func (d *Drafter) Reset() {
	d.finish()
	d.DGF.Reset()
}

// Adaptation is what the drafter's adapter has done so far.
func (d *Drafter) Adaptation() Stats { return d.a.Stats() }

// Version is the version of the draft's weights: in per-request mode the
// kept version the request's trials start from, else the version that
// drafted the last tree.
func (d *Drafter) Version() int {
	if d.a.cfg.Mode == PerRequest {
		return d.a.l.Version()
	}
	return d.DGF.Version()
}

// Mode is the adapter's mode.
func (d *Drafter) Mode() Mode { return d.a.cfg.Mode }

// Finish ends the sequence (Generate calls it when it returns): the
// trainer stops yielding to it, and its text joins the shared memory.
func (d *Drafter) Finish() { d.finish() }

func (d *Drafter) finish() {
	if d.active {
		d.a.end()
		d.active = false
	}
	if d.a.cfg.Mode == PerRequest && len(d.toks) > 0 {
		if err := d.a.l.Restore(); err != nil {
			d.a.fail(fmt.Errorf("adaptation: %w", err))
		}
	}
	d.toks, d.feats = d.toks[:0], d.feats[:0]
	// The finished text joins the shared memory in one piece, so that
	// sequences decoding side by side do not interleave there.
	if len(d.text) > 0 {
		d.a.mem.Begin()
		d.a.mem.Append(d.text)
		d.text = d.text[:0]
		d.own.Reset()
	}
}

// keep remembers the request's positions (per-request mode).
func (d *Drafter) keep(tokens []int, features [][]float32) {
	if d.a.cfg.Mode != PerRequest {
		return
	}
	d.toks = append(d.toks, tokens...)
	for _, f := range features {
		d.feats = append(d.feats, append([]float32(nil), f...))
	}
}

// step is per-request mode's gradient step on the request's newest
// positions, published as a trial for the next round.
func (d *Drafter) step() {
	a := d.a
	if a.cfg.Mode != PerRequest || len(d.toks) < 3 {
		return
	}
	lo := max(0, len(d.toks)-a.cfg.RequestWindow)
	w := Window{Tokens: d.toks[lo:], Features: d.feats[lo:]}
	if _, err := a.l.Train([]Window{w}); err != nil {
		a.fail(fmt.Errorf("adaptation: %w", err))
		return
	}
	if _, err := a.l.Publish(false); err != nil {
		a.fail(fmt.Errorf("adaptation: %w", err))
		return
	}
	a.mu.Lock()
	a.st.Runs++
	a.mu.Unlock()
}
