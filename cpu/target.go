package cpu

import (
	"fmt"
	"slices"
	"sync"

	"dovetail/cpu/kernels"
	"dovetail/models"
)

// Target runs one sequence of a model on the CPU with the fastest kernels
// available. It satisfies engine.Target without importing it.
type Target struct {
	f   *Fast
	s   *Seq
	par []int
	// Outputs handed out by Forward and Extend, reused by the next call.
	last                   []float32
	treeLogits, treeHidden [][]float32
	views, hviews          [][]float32 // rows of a single batch, not copied
	features               [][]float32
	err                    error // why the sequence could not be made
}

var defaultKernels = sync.OnceValues(kernels.Best)

// DefaultKernels is kernels.Best, or the pure-Go set when the choice forced
// by DOVETAIL_KERNELS is not available (the app reports that error).
func DefaultKernels() *kernels.Set {
	if k, err := defaultKernels(); err == nil {
		return k
	}
	k, _ := kernels.ByName("go")
	return k
}

// NewTarget prepares m for a context of ctx positions (0: the model's own)
// on pool, with DefaultKernels.
func NewTarget(m *models.Llama, pool *Pool, ctx int) *Target {
	return NewTargetWith(NewFast(m, DefaultKernels(), pool, ctx))
}

// NewTargetWith runs a sequence of f. Where f offloads layers, making the
// sequence's part on the other device can fail: Err says so, and every
// call returns that error.
func NewTargetWith(f *Fast) *Target {
	s, err := f.NewSeq()
	if err != nil {
		s = &Seq{f: f}
	}
	return &Target{f: f, s: s, last: make([]float32, f.M.Config.Vocab), err: err}
}

// Err is why the target's sequence could not be made (nil: it was).
func (t *Target) Err() error { return t.err }

// Close releases what the sequence holds on another device.
func (t *Target) Close() { t.s.Free() }

// Forward runs tokens in batches, commits them, and returns the logits of
// the last one.
func (t *Target) Forward(tokens []int) ([]float32, error) {
	return t.forward(tokens, false)
}

// ForwardFeatures is Forward that also returns every token's final hidden
// state, which the batches compute anyway (or, after ExportLayers, the
// residual stream before the layers it names).
func (t *Target) ForwardFeatures(tokens []int) ([]float32, [][]float32, error) {
	t.features = t.features[:0]
	lg, err := t.forward(tokens, true)
	return lg, t.features, err
}

func (t *Target) forward(tokens []int, keepHidden bool) ([]float32, error) {
	var row func(int, []float32) error
	if keepHidden {
		row = func(_ int, h []float32) error { t.features = append(t.features, slices.Clone(h)); return nil }
	}
	if err := t.prefill(tokens, true, true, row); err != nil {
		return nil, err
	}
	copy(t.last, t.s.logits[:len(t.last)])
	return t.last, nil
}

// Hidden runs tokens after the committed ones and commits them, handing
// each token's final hidden state (after the final norm: what the output
// layer would multiply) to each, in order, as a view valid during the
// call. No logits are computed: an embedding pools these and needs no
// output layer. An error from each stops the pass and is returned.
func (t *Target) Hidden(tokens []int, each func(pos int, hidden []float32) error) error {
	return t.prefill(tokens, false, false, each)
}

// prefill runs tokens in batches of at most maxBatch and commits them.
// With logits, the last token's are left in t.s.logits; row, when set, is
// handed every token's final hidden state, or with features its feature
// row (see featureRows).
func (t *Target) prefill(tokens []int, logits, features bool, row func(i int, hidden []float32) error) error {
	if t.err != nil {
		return t.err
	}
	if len(tokens) == 0 {
		return fmt.Errorf("forward: no tokens")
	}
	if t.Len()+len(tokens) > t.Context() {
		return fmt.Errorf("context full: %d + %d tokens > %d", t.Len(), len(tokens), t.Context())
	}
	t.s.pending.Reset()
	for lo := 0; lo < len(tokens); lo += maxBatch {
		chunk := tokens[lo:min(lo+maxBatch, len(tokens))]
		t.par = t.par[:0]
		for i := range chunk {
			t.par = append(t.par, i-1)
		}
		logitsFrom := len(chunk) // none
		if logits && lo+len(chunk) == len(tokens) {
			logitsFrom = len(chunk) - 1
		}
		if err := t.s.forward(chunk, t.par, logitsFrom); err != nil {
			t.s.pending.Reset()
			return err
		}
		rows, w := t.s.hidden, t.f.M.Config.Hidden
		if features {
			rows, w = t.featureRows()
		}
		for i := 0; row != nil && i < len(chunk); i++ {
			if err := row(lo+i, rows[i*w:(i+1)*w]); err != nil {
				t.s.pending.Reset()
				return err
			}
		}
		for i := range t.par {
			t.par[i] = i
		}
		if err := t.s.commit(t.par); err != nil {
			return err
		}
	}
	return nil
}

// Extend runs tree nodes after the committed tokens and the pending nodes
// (see engine.Target) and returns each new node's logits and final
// hidden state (or, after ExportLayers, its exported layers' inputs). The
// slices are reused by the next call.
func (t *Target) Extend(tokens, parents []int) (logits, hidden [][]float32, err error) {
	c := t.f.M.Config
	if t.err != nil {
		return nil, nil, t.err
	}
	if len(parents) != len(tokens) {
		return nil, nil, fmt.Errorf("extend: %d tokens but %d parents", len(tokens), len(parents))
	}
	if len(tokens) <= maxBatch {
		// One batch: hand out its rows where they lie, no copy.
		if err := t.s.forward(tokens, parents, 0); err != nil {
			return nil, nil, err
		}
		t.views, t.hviews = t.views[:0], t.hviews[:0]
		rows, w := t.featureRows()
		for i := range tokens {
			t.views = append(t.views, t.s.logits[i*c.Vocab:(i+1)*c.Vocab])
			t.hviews = append(t.hviews, rows[i*w:(i+1)*w])
		}
		return t.views, t.hviews, nil
	}
	_, w := t.featureRows()
	for len(t.treeLogits) < len(tokens) {
		t.treeLogits = append(t.treeLogits, make([]float32, c.Vocab))
		t.treeHidden = append(t.treeHidden, make([]float32, w))
	}
	for lo := 0; lo < len(tokens); lo += maxBatch {
		hi := min(lo+maxBatch, len(tokens))
		if err := t.s.forward(tokens[lo:hi], parents[lo:hi], 0); err != nil {
			return nil, nil, err
		}
		rows, _ := t.featureRows()
		for i := lo; i < hi; i++ {
			copy(t.treeLogits[i], t.s.logits[(i-lo)*c.Vocab:(i-lo+1)*c.Vocab])
			copy(t.treeHidden[i], rows[(i-lo)*w:(i-lo+1)*w])
		}
	}
	return t.treeLogits[:len(tokens)], t.treeHidden[:len(tokens)], nil
}

// Commit keeps a chain of pending nodes and drops the rest.
func (t *Target) Commit(path []int) error {
	if t.err != nil {
		return t.err
	}
	return t.s.commit(path)
}

// Len is the number of committed tokens.
func (t *Target) Len() int { return t.s.len }

// Truncate forgets tokens from n on, and any pending nodes.
func (t *Target) Truncate(n int) error {
	if n < 0 || n > t.s.len {
		return fmt.Errorf("truncate to %d: the sequence holds %d tokens", n, t.s.len)
	}
	t.s.pending.Reset()
	t.s.len = n
	return nil
}

// Context is the capacity of the sequence.
func (t *Target) Context() int { return t.f.ctx }

// Vocab is the number of logits.
func (t *Target) Vocab() int { return t.f.M.Config.Vocab }

// Kernels names the kernel set in use.
func (t *Target) Kernels() string { return t.f.K.Name }

// KernelBuild identifies the kernels' code (see kernels.Set.Build).
func (t *Target) KernelBuild() string { return t.f.K.Build }
