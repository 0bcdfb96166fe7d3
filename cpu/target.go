package cpu

import (
	"fmt"

	"dovetail/models"
)

// Target runs one sequence of a model on the CPU. It satisfies
// engine.Target without importing it.
type Target struct {
	ref    *Reference
	state  *State
	logits []float32
	// Outputs of the last Extend, grown as needed.
	treeLogits, treeHidden [][]float32
}

// NewTarget prepares m for a context of ctx positions (0: the model's) on
// pool.
func NewTarget(m *models.Llama, pool *Pool, ctx int) *Target {
	r := NewReference(m, pool, ctx)
	return &Target{ref: r, state: r.NewState(), logits: make([]float32, m.Config.Vocab)}
}

// Forward runs tokens and returns the logits of the last one.
func (t *Target) Forward(tokens []int) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("forward: no tokens")
	}
	if t.Len()+len(tokens) > t.Context() {
		return nil, fmt.Errorf("context full: %d + %d tokens > %d", t.Len(), len(tokens), t.Context())
	}
	for i, tok := range tokens {
		var logits []float32
		if i == len(tokens)-1 {
			logits = t.logits
		}
		if err := t.ref.Forward(t.state, tok, logits, nil); err != nil {
			return nil, err
		}
	}
	return t.logits, nil
}

// Extend runs tree nodes after the committed tokens and the pending nodes
// (see Reference.Extend) and returns each new node's logits and final
// hidden state. The slices are reused by the next call.
func (t *Target) Extend(tokens, parents []int) (logits, hidden [][]float32, err error) {
	c := t.ref.M.Config
	for len(t.treeLogits) < len(tokens) {
		t.treeLogits = append(t.treeLogits, make([]float32, c.Vocab))
		t.treeHidden = append(t.treeHidden, make([]float32, c.Hidden))
	}
	logits, hidden = t.treeLogits[:len(tokens)], t.treeHidden[:len(tokens)]
	if err := t.ref.Extend(t.state, tokens, parents, logits, hidden); err != nil {
		return nil, nil, err
	}
	return logits, hidden, nil
}

// Commit keeps a chain of pending nodes and drops the rest.
func (t *Target) Commit(path []int) error { return t.state.Commit(path) }

// Len is the number of committed tokens.
func (t *Target) Len() int { return t.state.Cache.Len }

// Truncate forgets tokens from n on.
func (t *Target) Truncate(n int) error {
	t.state.pending = t.state.pending[:0]
	return t.state.Cache.Truncate(n)
}

// Context is the capacity of the sequence.
func (t *Target) Context() int { return t.state.Cache.Cap() }

// Vocab is the number of logits.
func (t *Target) Vocab() int { return t.ref.M.Config.Vocab }
