package drafters

import (
	"fmt"

	"dovetail/engine"
	"dovetail/engine/tree"
)

// Model drafts with a smaller model of the same vocabulary run as a
// Target (llama.cpp's -md): it keeps its own KV cache of the context and
// grows EAGLE-2 trees from its logits.
type Model struct {
	t         engine.Target
	committed []int // tokens in the draft's cache
}

// NewModel drafts with t, which must share the target's vocabulary.
func NewModel(t engine.Target) *Model { return &Model{t: t} }

// CatchUp brings the draft's cache up to ctx but its root (CatchUpper).
func (d *Model) CatchUp(ctx []int) (int, error) {
	keep := d.keep(ctx)
	if err := d.t.Truncate(keep); err != nil {
		return 0, err
	}
	d.committed = d.committed[:keep]
	n := len(ctx) - 1 - keep
	if n <= 0 || len(ctx) > d.t.Context() {
		return 0, nil
	}
	if _, err := d.t.Forward(ctx[keep : len(ctx)-1]); err != nil {
		return 0, fmt.Errorf("draft model: %w", err)
	}
	d.committed = append(d.committed, ctx[keep:len(ctx)-1]...)
	return n, nil
}

// keep is the length of the common prefix of the draft's cache and ctx
// without its root: the draft may hold tokens the target refused.
func (d *Model) keep(ctx []int) int {
	keep := 0
	for keep < len(d.committed) && keep < len(ctx)-1 && d.committed[keep] == ctx[keep] {
		keep++
	}
	return keep
}

// Draft brings the draft's cache up to ctx (the tokens accepted last round
// and the root) and grows a tree below the root.
func (d *Model) Draft(ctx []int, p tree.Params) (*tree.Tree, error) {
	keep := d.keep(ctx)
	if err := d.t.Truncate(keep); err != nil {
		return nil, err
	}
	d.committed = d.committed[:keep]
	// Room for the new tokens plus every expanded node; without it, draft
	// nothing.
	if len(ctx)+p.Depth*p.TopK > d.t.Context() {
		return &tree.Tree{}, nil
	}
	logits, err := d.t.Forward(ctx[keep:])
	if err != nil {
		return nil, fmt.Errorf("draft model: %w", err)
	}
	d.committed = append(d.committed, ctx[keep:]...)
	return tree.Build(p, logits, func(tokens, parents []int) ([][]float32, error) {
		lg, _, err := d.t.Extend(tokens, parents)
		return lg, err
	})
}

// Accepted does nothing: the next Draft feeds the accepted tokens.
func (d *Model) Accepted([]int, [][]float32) {}

// Reset forgets the cache.
func (d *Model) Reset() {
	d.committed = d.committed[:0]
	d.t.Truncate(0)
}

// Finish does nothing: the next Generate resets the cache.
func (d *Model) Finish() {}
