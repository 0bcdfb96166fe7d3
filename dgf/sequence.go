package dgf

import (
	"fmt"
	"math"
	"slices"

	"dovetail/block"
	"dovetail/device"
	"dovetail/internal/pending"
	"dovetail/internal/topk"
)

// seqRows is the most rows one drafting pass runs; longer inputs run in
// several passes.
const seqRows = 64

// treeRoom is how many slots a sequence holds beyond its context for the
// nodes of a draft tree (the server tree expands 70).
const treeRoom = 256

// Sequence is one sequence of a draft while it drafts: the KV cache of its
// committed positions, and a tree of pending nodes after them. It
// implements drafters.FeatureModel (without importing it): position i
// reads the pair (f_i, x_{i+1}) and predicts f̂_{i+1}.
type Sequence struct {
	d       *Draft
	ctx     int
	kc, vc  []device.Buffer // per block: ctx × KVDim
	len     int             // committed positions
	pending pending.Tree

	a      *Acts // seqRows rows; k and v point into the cache per pass
	logits device.Buffer

	outLogits, outPred [][]float32 // rows of the slabs
	lgSlab, predSlab   []float32
	headSlab           []float32       // a reduced vocabulary's logits before they are spread to the target's
	outTop             [][]topk.Choice // rows of topSlab
	topSlab            []topk.Choice

	live *Live        // nil for a sequence of a plain draft
	ver  *liveVersion // the version of live it holds

	// KeepCache keeps the committed positions' keys and values when
	// Refresh switches weights. Per-request adaptation changes the
	// weights by one small step a round: re-running the whole context
	// each round would cost more than the slightly stale cache loses.
	KeepCache bool
}

// NewSequence allocates a sequence of up to ctx positions (≤ 0: the
// draft's context), and room for a draft tree after them.
func (d *Draft) NewSequence(ctx int) *Sequence {
	if ctx <= 0 {
		ctx = d.C.Context
	}
	ctx += treeRoom
	s := &Sequence{d: d, ctx: ctx}
	for range d.C.Blocks {
		s.kc = append(s.kc, d.Dev.Alloc(ctx*d.C.KVDim()))
		s.vc = append(s.vc, d.Dev.Alloc(ctx*d.C.KVDim()))
	}
	s.a = d.NewActs(seqRows, seqRows*d.C.Heads*ctx, false)
	s.logits = d.Dev.Alloc(seqRows * d.C.HeadVocab())
	return s
}

// Free releases the sequence's device memory.
func (s *Sequence) Free() {
	dev := s.d.Dev
	for b := range s.kc {
		dev.Free(s.kc[b])
		dev.Free(s.vc[b])
	}
	s.a.Free(s.d, false)
	dev.Free(s.logits)
	if s.live != nil {
		s.live.mu.Lock()
		s.live.release(s.ver)
		s.live.mu.Unlock()
		s.live = nil
	}
}

// Len is the number of committed positions.
func (s *Sequence) Len() int { return s.len }

// Context is the most positions and tree nodes the sequence holds.
func (s *Sequence) Context() int { return s.ctx }

// Vocab is the size of the logits.
func (s *Sequence) Vocab() int { return s.d.C.Vocab }

// Truncate forgets positions from n on, and any pending nodes.
func (s *Sequence) Truncate(n int) error {
	if n < 0 || n > s.len {
		return fmt.Errorf("draft: truncate to %d: the sequence holds %d positions", n, s.len)
	}
	s.len = n
	s.pending.Reset()
	return nil
}

// check checks a pass's inputs: features width wide (the target's, or
// the draft's own predicted ones), tokens in the vocabulary.
func (s *Sequence) check(features [][]float32, tokens []int, width int) error {
	if len(features) != len(tokens) {
		return fmt.Errorf("draft: %d features for %d tokens", len(features), len(tokens))
	}
	for i, f := range features {
		if len(f) != width {
			return fmt.Errorf("draft: feature %d has %d values, want %d", i, len(f), width)
		}
		if tokens[i] < 0 || tokens[i] >= s.d.C.Vocab {
			return fmt.Errorf("draft: token %d outside the vocabulary [0, %d)", tokens[i], s.d.C.Vocab)
		}
	}
	return nil
}

// cacheAttn is drafting attention: committed keys in the cache, then the
// pending nodes, each seeing its ancestors.
type cacheAttn struct {
	s *Sequence
	a device.Attn
}

func (c *cacheAttn) Attend(b int, ba *block.Acts) {
	d := c.s.d
	keys := c.a.Keys() * d.C.KVDim()
	d.Dev.Attention(ba.Att, ba.Probs, ba.Q, d.Dev.View(c.s.kc[b], 0, keys), d.Dev.View(c.s.vc[b], 0, keys), c.a)
}

func (c *cacheAttn) AttendBackward(int, *block.Acts, device.Buffer, device.Buffer, device.Buffer, device.Buffer) {
	panic("dgf: no backward pass through a drafting sequence")
}

// pass runs n rows whose keys go to cache slots [slot, slot+n).
func (s *Sequence) pass(features [][]float32, tokens, pos []int, slot int, at device.Attn) *Acts {
	d, dev, c := s.d, s.d.Dev, s.d.C
	n := len(tokens)
	a := s.a.View(d, n, n*c.Heads*at.Keys(), false)
	KV := c.KVDim()
	for b := range a.Blocks {
		a.Blocks[b].K = dev.View(s.kc[b], slot*KV, n*KV)
		a.Blocks[b].V = dev.View(s.vc[b], slot*KV, n*KV)
	}
	flat := make([]float32, 0, n*len(features[0]))
	for _, f := range features {
		flat = append(flat, f...)
	}
	// A tree node reads its parent's predicted feature: for EAGLE-3 that
	// is the layer's own state, narrower than the target's three.
	a.Predicted = len(features[0]) != c.FeatureIn()
	dev.Upload(dev.View(a.F, 0, len(flat)), flat)
	at.Heads, at.KVHeads, at.HeadDim = c.Heads, c.KVHeads, c.HeadDim
	// A tree level of n nodes is the same launches every round but for
	// its values: a GPU replays them as a graph where they are only
	// kernels (an int8 draft's, with no cuBLAS product among them).
	device.Graphed(dev, passKey{s, n, at.Mask != nil}, func() {
		d.Forward(a, tokens, pos, &cacheAttn{s: s, a: at})
	})
	return a
}

// passKey names a sequence's passes of one shape, for device.Graphed.
type passKey struct {
	s      *Sequence
	n      int
	masked bool
}

// Forward commits positions: pair i is (features[i], tokens[i]) = (f_t,
// x_{t+1}) for t = Len()+i. Pending nodes are dropped. It returns the
// logits and predicted feature of the last pair, valid until the next call.
func (s *Sequence) Forward(features [][]float32, tokens []int) (logits, predicted []float32, err error) {
	a, err := s.commit(features, tokens)
	if err != nil {
		return nil, nil, err
	}
	s.outputs(a, a.N-1, 1, 0)
	return s.outLogits[0], s.outPred[0], nil
}

// ForwardTop is Forward that returns, instead of the logits, their k most
// likely tokens under softmax(scale·logits) (Device.TopK): on a GPU the
// vocabulary's logits never cross to the host.
func (s *Sequence) ForwardTop(features [][]float32, tokens []int, k int, scale float32) (top []topk.Choice, predicted []float32, err error) {
	a, err := s.commit(features, tokens)
	if err != nil {
		return nil, nil, err
	}
	s.ranked(a, a.N-1, 1, 0, k, scale)
	return s.outTop[0], s.outPred[0], nil
}

// Advance is Forward without its outputs (drafters.Advancer): a drafter
// catching up on committed positions reads nothing of them, and the LM
// head's row would cost as much as the rest of a draft step.
func (s *Sequence) Advance(features [][]float32, tokens []int) error {
	_, err := s.commit(features, tokens)
	return err
}

// commit runs Forward's positions and returns the last pass.
func (s *Sequence) commit(features [][]float32, tokens []int) (*Acts, error) {
	if err := s.check(features, tokens, s.d.C.FeatureIn()); err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("draft: forward of no positions")
	}
	if s.len+len(tokens) > s.ctx {
		return nil, fmt.Errorf("draft: context full: %d + %d positions > %d", s.len, len(tokens), s.ctx)
	}
	s.pending.Reset()
	var a *Acts
	for lo := 0; lo < len(tokens); lo += seqRows {
		hi := min(lo+seqRows, len(tokens))
		pos := make([]int, hi-lo)
		for i := range pos {
			pos[i] = s.len + i
		}
		a = s.pass(features[lo:hi], tokens[lo:hi], pos, s.len, device.Attn{Past: s.len, Pend: hi - lo, Rows: hi - lo})
		s.len += hi - lo
	}
	return a, nil
}

// outputs downloads the predicted features and logits of rows [from,
// from+n) of a's pass into outputs [to, to+n): one download each, since on
// a GPU every download waits for the device.
func (s *Sequence) outputs(a *Acts, from, n, to int) {
	V := s.d.C.Vocab
	if len(s.outLogits) < to+n {
		s.lgSlab = slices.Grow(s.lgSlab[:len(s.outLogits)*V], (to+n-len(s.outLogits))*V)[:(to+n)*V]
		s.outLogits = s.outLogits[:0]
		for i := range to + n {
			s.outLogits = append(s.outLogits, s.lgSlab[i*V:(i+1)*V:(i+1)*V])
		}
	}
	lg := s.head(a, from, n, to)
	if s.d.D2T == nil {
		s.d.Dev.Download(s.lgSlab[to*V:(to+n)*V], lg)
		return
	}
	// A reduced vocabulary: the target's other tokens are never drafted.
	hv := s.d.C.HeadVocab()
	s.headSlab = slices.Grow(s.headSlab[:0], n*hv)[:n*hv]
	s.d.Dev.Download(s.headSlab, lg)
	for i := range n {
		row := s.lgSlab[(to+i)*V : (to+i+1)*V]
		for j := range row {
			row[j] = float32(math.Inf(-1))
		}
		for j, t := range s.d.D2T {
			row[t] = s.headSlab[i*hv+j]
		}
	}
}

// ranked is outputs with each row's logits ranked on the device: k
// choices under softmax(scale·logits) into outTop[to, to+n).
func (s *Sequence) ranked(a *Acts, from, n, to, k int, scale float32) {
	hv := s.d.C.HeadVocab()
	k = min(k, hv)
	lg := s.head(a, from, n, to)
	s.topSlab = slices.Grow(s.topSlab[:to*k], n*k)[:(to+n)*k] // keeps this call's earlier passes
	s.d.Dev.TopK(s.topSlab[to*k:], lg, n, hv, k, scale)
	if s.d.D2T != nil {
		for i := range s.topSlab[to*k:] {
			c := &s.topSlab[to*k+i]
			c.Token = int(s.d.D2T[c.Token])
		}
	}
	s.outTop = s.outTop[:0]
	for i := range to + n {
		s.outTop = append(s.outTop, s.topSlab[i*k:(i+1)*k:(i+1)*k])
	}
}

// head downloads the predicted features of rows [from, from+n) of a's
// pass into outPred[to, to+n) and returns their logits, on the device.
func (s *Sequence) head(a *Acts, from, n, to int) device.Buffer {
	dev, c := s.d.Dev, s.d.C
	H, V := c.Hidden, c.HeadVocab()
	if len(s.outPred) < to+n {
		s.predSlab = slices.Grow(s.predSlab[:len(s.outPred)*H], (to+n-len(s.outPred))*H)[:(to+n)*H]
		s.outPred = s.outPred[:0]
		for i := range to + n {
			s.outPred = append(s.outPred, s.predSlab[i*H:(i+1)*H:(i+1)*H])
		}
	}
	out := dev.View(a.Out(), from*H, n*H)
	lg := dev.View(s.logits, 0, n*V)
	var on device.Buffer
	if a.ON != nil {
		on = dev.View(a.ON, from*H, n*H)
	}
	s.d.Logits(lg, out, on, n, true)
	dev.Download(s.predSlab[to*H:(to+n)*H], out)
	return lg
}

// Extend runs tree nodes after the committed positions and the pending
// nodes: node i pairs features[i] (its parent's predicted feature) with
// tokens[i]. parents[i] indexes the pending nodes (earlier calls' first,
// then this call's) or is −1 for a child of the committed positions. A
// node sees the committed positions and its ancestors; its position is
// Len() + depth. It returns each node's logits and predicted feature,
// valid until the next call.
func (s *Sequence) Extend(features [][]float32, tokens, parents []int) (logits, predicted [][]float32, err error) {
	if err := s.extend(features, tokens, parents, func(a *Acts, n, to int) { s.outputs(a, 0, n, to) }); err != nil {
		return nil, nil, err
	}
	return s.outLogits[:len(tokens)], s.outPred[:len(tokens)], nil
}

// ExtendTop is Extend that returns each node's k most likely tokens under
// softmax(scale·logits), as ForwardTop does.
func (s *Sequence) ExtendTop(features [][]float32, tokens, parents []int, k int, scale float32) (top [][]topk.Choice, predicted [][]float32, err error) {
	if err := s.extend(features, tokens, parents, func(a *Acts, n, to int) { s.ranked(a, 0, n, to, k, scale) }); err != nil {
		return nil, nil, err
	}
	return s.outTop[:len(tokens)], s.outPred[:len(tokens)], nil
}

// extend runs Extend's nodes, handing each pass of n rows, outputs [to,
// to+n), to emit.
func (s *Sequence) extend(features [][]float32, tokens, parents []int, emit func(a *Acts, n, to int)) error {
	if err := s.check(features, tokens, s.d.C.Hidden); err != nil {
		return err
	}
	if len(parents) != len(tokens) {
		return fmt.Errorf("draft: extend: %d tokens but %d parents", len(tokens), len(parents))
	}
	if err := s.pending.Check(parents); err != nil {
		return fmt.Errorf("draft: %w", err)
	}
	base := s.pending.Len()
	if s.len+base+len(tokens) > s.ctx {
		return fmt.Errorf("draft: context full: %d positions + %d tree nodes > %d", s.len, base+len(tokens), s.ctx)
	}
	for lo := 0; lo < len(tokens); lo += seqRows {
		hi := min(lo+seqRows, len(tokens))
		n, first := hi-lo, s.pending.Len()
		pos := s.pending.Add(parents[lo:hi], s.len, make([]int, 0, n))
		m := s.pending.Len()
		mask := make([]uint8, n*m)
		s.pending.MaskRows(mask, first)
		a := s.pass(features[lo:hi], tokens[lo:hi], pos, s.len+first, device.Attn{Past: s.len, Pend: m, Rows: n, Mask: mask})
		emit(a, n, lo)
	}
	return nil
}
