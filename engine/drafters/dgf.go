// Package drafters proposes draft trees for the engine to verify: prompt
// lookup (Ngram), a smaller model of the same vocabulary (Model), and a
// draft that reads the target's features (DGF: Dovetail's draft model,
// on whatever device runs its FeatureModel).
package drafters

import (
	"context"
	"fmt"
	"slices"

	"dovetail/engine/tree"
)

// FeatureModel is a draft model that reads the target's features
// (Dovetail's DGF draft, EAGLE-style) on some device. Draft position t
// reads the pair (f_t, x_{t+1}) — the target's final hidden state at t and
// the next token — and predicts f̂_{t+1}, whose logits give x_{t+2}.
type FeatureModel interface {
	// Forward commits draft positions after the committed ones: pair i is
	// (features[i], tokens[i]) = (f_t, x_{t+1}). Pending nodes are dropped.
	// It returns the logits and predicted feature f̂ of the last pair,
	// valid until the next call.
	Forward(features [][]float32, tokens []int) (logits, predicted []float32, err error)
	// Extend runs pending tree nodes: node i pairs features[i] (its
	// parent's predicted f̂) with tokens[i]; parents index the pending
	// nodes (-1: a child of the committed positions), as in Target.Extend.
	// It returns each node's logits and predicted feature, valid until the
	// next call.
	Extend(features [][]float32, tokens, parents []int) (logits, predicted [][]float32, err error)
	// Truncate forgets positions from n on, and any pending nodes.
	Truncate(n int) error
	// Len is the number of committed positions.
	Len() int
	// Context is the most positions it holds.
	Context() int
	// Vocab is the size of the logits.
	Vocab() int
}

// RankingModel is a FeatureModel that ranks its own logits (dgf.Sequence):
// ForwardTop and ExtendTop are Forward and Extend returning, instead of
// the logits, their k most likely tokens under softmax(scale·logits),
// most likely first (ties: the lower token first). On a GPU the
// vocabulary's logits then never cross to the host.
type RankingModel interface {
	ForwardTop(features [][]float32, tokens []int, k int, scale float32) (top []tree.Choice, predicted []float32, err error)
	ExtendTop(features [][]float32, tokens, parents []int, k int, scale float32) (top [][]tree.Choice, predicted [][]float32, err error)
}

// Advancer is a FeatureModel that can commit positions without computing
// their outputs (dgf.Sequence): a drafter catching up needs none.
type Advancer interface {
	Advance(features [][]float32, tokens []int) error
}

// Refresher is a FeatureModel whose weights online adaptation replaces
// (dgf.Sequence of a dgf.Live draft): Refresh switches to the newest
// weights, forgetting the committed positions when it does, and returns
// their version.
type Refresher interface {
	Refresh() (version int, switched bool)
}

// DGF drafts with a FeatureModel. It keeps the target features it
// has been told (the prompt's at prefill, then the root's and accepted
// nodes' every round) and, before each tree, commits the draft positions
// it is missing — the last of which pairs the newest target feature with
// the root token, whose outputs are the root's logits and f̂ — then grows
// an EAGLE-2 tree, each frontier node reading its parent's f̂.
type DGF struct {
	// Sharpness multiplies the draft's logits when the tree is ranked (0
	// or 1: as the draft computes them). A draft trained on the target's
	// whole distribution underrates the target's argmax, which is what
	// greedy verification accepts; sharpening (2 for greedy decoding)
	// spends the γ nodes on depth rather than on alternatives. The tree
	// is only a proposal: the output is the same either way.
	Sharpness float32

	m        FeatureModel
	features [][]float32     // f_0, f_1, … of the context, as the target computed them
	tokens   []int           // x_0 … x_Len(): the tokens of the committed draft positions
	pred     [][]float32     // f̂ of each pending node of the current tree
	version  int             // of the weights that drafted the last tree
	ctx      context.Context // the request's (BindContext); nil: never cancelled
}

// BindContext makes the long catch-ups of the request under way end with
// ctx's error when ctx ends (engine.ContextDrafter).
func (d *DGF) BindContext(ctx context.Context) { d.ctx = ctx }

// catchUpChunk is the most draft positions committed between checks of
// the request's context: after a switch to new weights a draft reads the
// whole context again, thousands of positions, which on the CPU takes
// seconds.
const catchUpChunk = 256

// advance commits draft positions keep … to−1 (pairs (f_t, x_{t+1})) a
// chunk at a time, checking the request's context between chunks, and
// returns how many are committed. A model that cannot commit without
// computing outputs (no Advancer) is left for the caller's Forward.
func (d *DGF) advance(ctx []int, keep, to int) (int, error) {
	a, ok := d.m.(Advancer)
	if !ok {
		return keep, nil
	}
	for keep < to {
		if d.ctx != nil {
			if err := d.ctx.Err(); err != nil {
				return keep, err
			}
		}
		hi := min(keep+catchUpChunk, to)
		if err := a.Advance(d.features[keep:hi], ctx[keep+1:hi+1]); err != nil {
			return keep, fmt.Errorf("draft model: %w", err)
		}
		keep = hi
		d.tokens = append(d.tokens[:0], ctx[:keep+1]...)
	}
	return keep, nil
}

// NewDGF drafts with m, which must share the target's vocabulary.
func NewDGF(m FeatureModel) *DGF { return &DGF{m: m} }

// Prefilled records the prompt's features.
func (d *DGF) Prefilled(prompt []int, features [][]float32) {
	d.features = d.features[:0]
	d.Accepted(prompt, features)
}

// Accepted records the features of the root and the accepted nodes; the
// next Draft commits their draft positions.
func (d *DGF) Accepted(_ []int, features [][]float32) {
	for _, f := range features {
		d.features = append(d.features, slices.Clone(f))
	}
}

// Reset forgets the sequence.
func (d *DGF) Reset() {
	d.features, d.tokens = d.features[:0], d.tokens[:0]
	d.m.Truncate(0)
}

// Finish does nothing: the next Generate resets the sequence.
func (d *DGF) Finish() {}

// Draft grows a tree below the root ctx[L], L = len(ctx)−1. Draft
// positions 0 … L−1 read (f_t, x_{t+1}); the last is the root's.
func (d *DGF) Draft(ctx []int, p tree.Params) (*tree.Tree, error) {
	// Between rounds is where new weights come in: a switch empties the
	// draft's cache, and the positions below run again.
	if r, ok := d.m.(Refresher); ok {
		d.version, _ = r.Refresh()
	}
	L := len(ctx) - 1
	// Without the target's features up to the root there is nothing to
	// read (a prefill that did not pass them): draft nothing. Near the end
	// of the draft's context, grow a shallower tree: every expanded node
	// takes a slot.
	if p.TopK > 0 {
		p.Depth = min(p.Depth, (d.m.Context()-L)/p.TopK)
	}
	if L < 1 || len(d.features) < L || L >= d.m.Context() {
		return &tree.Tree{}, nil
	}
	// Keep the committed positions whose tokens still match, and always
	// rerun the root's position: its outputs seed the tree.
	keep, err := d.truncate(ctx, L)
	if err != nil {
		return nil, err
	}
	if L-keep > catchUpChunk {
		// New weights: every position again, in chunks a cancel can
		// stop between; the root's runs below as always.
		if keep, err = d.advance(ctx, keep, L-1); err != nil {
			return nil, err
		}
	}
	if rm, ok := d.m.(RankingModel); ok {
		return d.rankedTree(rm, ctx, keep, L, p)
	}
	logits, rootPred, err := d.m.Forward(d.features[keep:L], ctx[keep+1:L+1])
	if err != nil {
		return nil, fmt.Errorf("draft model: %w", err)
	}
	d.tokens = append(d.tokens[:0], ctx[:L+1]...)
	rootPred = slices.Clone(rootPred)
	d.pred = d.pred[:0]
	return tree.Build(p, d.sharpen(logits), func(tokens, parents []int) ([][]float32, error) {
		lg, pr, err := d.m.Extend(d.parentFeatures(rootPred, parents), tokens, parents)
		if err != nil {
			return nil, fmt.Errorf("draft model: %w", err)
		}
		d.keepPredicted(pr)
		if d.Sharpness > 0 && d.Sharpness != 1 {
			out := make([][]float32, len(lg))
			for i := range lg {
				out[i] = d.sharpen(lg[i])
			}
			lg = out
		}
		return lg, nil
	})
}

// truncate keeps the committed draft positions below L−1 whose tokens
// still match ctx, forgets the rest, and returns how many it kept.
func (d *DGF) truncate(ctx []int, L int) (int, error) {
	keep := 0
	for keep < d.m.Len() && keep < L-1 && keep+1 < len(d.tokens) && d.tokens[keep+1] == ctx[keep+1] && d.tokens[0] == ctx[0] {
		keep++
	}
	return keep, d.m.Truncate(keep)
}

// CatchUp commits the draft positions Draft(ctx, …) would run before the
// root's (CatchUpper): after it, Draft runs the root's position alone.
func (d *DGF) CatchUp(ctx []int) (int, error) {
	if r, ok := d.m.(Refresher); ok {
		d.version, _ = r.Refresh()
	}
	L := len(ctx) - 1
	if L < 2 || len(d.features) < L || L >= d.m.Context() {
		return 0, nil
	}
	from, err := d.truncate(ctx, L)
	if err != nil || from >= L-1 {
		return 0, err
	}
	keep, err := d.advance(ctx, from, L-1)
	if err != nil {
		return 0, err
	}
	if keep < L-1 {
		if _, _, err = d.m.Forward(d.features[keep:L-1], ctx[keep+1:L]); err != nil {
			return 0, fmt.Errorf("draft model: %w", err)
		}
	}
	d.tokens = append(d.tokens[:0], ctx[:L]...)
	return L - 1 - from, nil
}

// rankedTree is Draft's tree for a model that ranks its own logits.
func (d *DGF) rankedTree(rm RankingModel, ctx []int, keep, L int, p tree.Params) (*tree.Tree, error) {
	scale := d.Sharpness
	if scale <= 0 {
		scale = 1
	}
	root, rootPred, err := rm.ForwardTop(d.features[keep:L], ctx[keep+1:L+1], p.TopK, scale)
	if err != nil {
		return nil, fmt.Errorf("draft model: %w", err)
	}
	d.tokens = append(d.tokens[:0], ctx[:L+1]...)
	rootPred = slices.Clone(rootPred)
	d.pred = d.pred[:0]
	return tree.BuildRanked(p, slices.Clone(root), func(tokens, parents []int, k int) ([][]tree.Choice, error) {
		top, pr, err := rm.ExtendTop(d.parentFeatures(rootPred, parents), tokens, parents, k, scale)
		if err != nil {
			return nil, fmt.Errorf("draft model: %w", err)
		}
		d.keepPredicted(pr)
		return top, nil
	})
}

// parentFeatures is what frontier nodes read: their parents' predicted
// features, the root's for children of the root.
func (d *DGF) parentFeatures(rootPred []float32, parents []int) [][]float32 {
	feats := make([][]float32, len(parents))
	for i, par := range parents {
		feats[i] = rootPred
		if par >= 0 {
			feats[i] = d.pred[par]
		}
	}
	return feats
}

// keepPredicted keeps the predicted features of the nodes just run, which
// their children read.
func (d *DGF) keepPredicted(pr [][]float32) {
	for _, f := range pr {
		d.pred = append(d.pred, slices.Clone(f))
	}
}

// Version is the version of the weights that drafted the last tree (0
// when they never change).
func (d *DGF) Version() int { return d.version }

// sharpen scales a copy of logits by Sharpness.
func (d *DGF) sharpen(logits []float32) []float32 {
	if d.Sharpness <= 0 || d.Sharpness == 1 {
		return logits
	}
	out := make([]float32, len(logits))
	for i, v := range logits {
		out[i] = v * d.Sharpness
	}
	return out
}
