// Package block is the Llama decoder block on a device.Device, written
// once for every model that runs one there: the target's last layers on a
// GPU (package offload) and the draft's decoder blocks (package dgf), with
// the backward pass the draft trains by beside the forward pass.
//
//	xn  = RMSNorm(x)                        (none in the draft's first block)
//	mid = x + o(attention(rope(q(xn)), rope(k(xn)), v(xn)))
//	xn2 = RMSNorm(mid)
//	out = mid + down(SwiGLU(gate(xn2), up(xn2)))
//
// Where a pass's keys and values go and which of them each row sees is
// the caller's (an Attention): a KV cache and a tree when inferring, the
// windows of a training batch side by side when training.
package block

import (
	"fmt"

	"dovetail/device"
)

// Shape is a block's dimensions. AttnIn is the width of what the
// attention's projections read (0: Hidden): EAGLE-3's layer reads its
// normed embedding and normed state side by side, while its residual
// stream stays Hidden wide.
type Shape struct {
	Hidden, FFN             int
	Heads, KVHeads, HeadDim int
	RMSEps, RopeTheta       float32
	AttnIn                  int
}

// In is the width the attention's projections read.
func (s Shape) In() int {
	if s.AttnIn > 0 {
		return s.AttnIn
	}
	return s.Hidden
}

// QDim is the width of the queries (and of attention's output).
func (s Shape) QDim() int { return s.Heads * s.HeadDim }

// KVDim is the width of keys and values.
func (s Shape) KVDim() int { return s.KVHeads * s.HeadDim }

// Weight is one of a block's tensors on a device: float values W (nil
// when only Q is kept), their gradient G (nil unless training), and Q, a
// frozen matrix in a stored format (the target's GGUF type, a draft's
// Q8_0 copy) that inference multiplies with instead when it is set.
type Weight struct {
	W, G device.Buffer
	Q    device.Matrix
}

// Weights are one block's tensors, matrices out × in. AttnNorm is nil in
// a block that reads its input as it is (the draft's first block reads
// the DGF's output): its Acts' XN is then the input itself.
type Weights struct {
	AttnNorm                *Weight
	Q, K, V, O              *Weight
	FFNNorm, Gate, Up, Down *Weight
}

// Acts are one block's activations over a pass's rows, kept for the
// backward pass. K and V are where the pass's keys and values go: the
// block's own buffers in training, a KV cache's rows when inferring.
// Probs receives the attention weights. A pass that keeps nothing for a
// backward pass may make buffers one: the target's layers run XN2 in XN,
// and Mid and Out in the residual stream x, in place.
type Acts struct {
	XN, Q, K, V, Att, Probs, AO, Mid, XN2, G, U, HH, DN, Out device.Buffer
}

// Fields lists a's buffers with their widths per row, for allocating,
// viewing and freeing them together: XN unless ownXN is false (a block
// without an attention norm), K and V when ownKV (a training pass keeps
// its own), never Probs (its size is not per row).
func (a *Acts) Fields(s Shape, ownXN, ownKV bool) (bufs []*device.Buffer, widths []int) {
	H, F, Q, KV := s.Hidden, s.FFN, s.QDim(), s.KVDim()
	add := func(b *device.Buffer, w int) { bufs, widths = append(bufs, b), append(widths, w) }
	if ownXN {
		add(&a.XN, H)
	}
	add(&a.Q, Q)
	if ownKV {
		add(&a.K, KV)
		add(&a.V, KV)
	}
	for _, f := range []struct {
		b *device.Buffer
		w int
	}{{&a.Att, Q}, {&a.AO, H}, {&a.Mid, H}, {&a.XN2, H}, {&a.G, F}, {&a.U, F}, {&a.HH, F}, {&a.DN, H}, {&a.Out, H}} {
		add(f.b, f.w)
	}
	return bufs, widths
}

// Attention runs a pass's attention in block i: queries a.Q, keys and
// values a.K and a.V among those the caller keeps, output a.Att and its
// weights a.Probs; the backward pass adds the gradients of q, k and v
// (+=) from datt.
type Attention interface {
	Attend(i int, a *Acts)
	AttendBackward(i int, a *Acts, dq, dk, dv, datt device.Buffer)
}

// Pass is what one pass over n rows of a model's blocks shares: the
// device, the shape, the rows' RoPE positions, how attention runs, and
// whether Q copies serve the products (inference; training reads W).
// RopeFreqs, when set, divides each RoPE pair's frequency (Llama 3's
// long-context factors); the device must then be a device.FreqRoPE.
type Pass struct {
	Dev       device.Device
	Shape     Shape
	N         int
	Pos       []int
	Attn      Attention
	Frozen    bool
	RopeFreqs []float32
}

// rope rotates x's heads by the pass's positions (backward: the inverse).
func (p *Pass) rope(x device.Buffer, heads int, backward bool) {
	s := p.Shape
	if p.RopeFreqs == nil {
		if backward {
			p.Dev.RoPEBackward(x, p.Pos, heads, s.HeadDim, s.RopeTheta)
		} else {
			p.Dev.RoPE(x, p.Pos, heads, s.HeadDim, s.RopeTheta)
		}
		return
	}
	fr, ok := p.Dev.(device.FreqRoPE)
	if !ok {
		panic(&device.Error{Err: fmt.Errorf("%s cannot scale RoPE frequencies", p.Dev.Name())})
	}
	if backward {
		fr.RoPEFreqsBackward(x, p.Pos, heads, s.HeadDim, s.RopeTheta, p.RopeFreqs)
	} else {
		fr.RoPEFreqs(x, p.Pos, heads, s.HeadDim, s.RopeTheta, p.RopeFreqs)
	}
}

// Forward runs block i over the pass's rows of x [n×Hidden]; the output
// is in a.Out. A block without an attention norm reads a.XN as the caller
// set it [n×In]: x itself, or (EAGLE-3) a wider input beside it.
func (p *Pass) Forward(i int, w *Weights, a *Acts, x device.Buffer) {
	dev, s, n := p.Dev, p.Shape, p.N
	H, Q, F := s.Hidden, s.QDim(), s.FFN
	if w.AttnNorm != nil {
		dev.RMSNorm(a.XN, x, w.AttnNorm.W, n, H, s.RMSEps)
	}
	p.qkv(w, a)
	if !device.RoPEQK(dev, a.Q, a.K, p.Pos, s.Heads, s.KVHeads, s.HeadDim, s.RopeTheta, p.RopeFreqs) {
		p.rope(a.Q, s.Heads, false)
		p.rope(a.K, s.KVHeads, false)
	}
	p.Attn.Attend(i, a)
	p.residual(a.Mid, x, a.Att, a.AO, w.O, Q, H)
	dev.RMSNorm(a.XN2, a.Mid, w.FFNNorm.W, n, H, s.RMSEps)
	p.glu(w, a)
	p.residual(a.Out, a.Mid, a.HH, a.DN, w.Down, F, H)
}

// Each step below runs as one fused operation where the device has it
// (a GPU: see device.MatMulFrozen3 and the rest) and the pass may fuse
// (fused), else as its parts.

// qkv: q, k, v = xn·Wqᵀ, xn·Wkᵀ, xn·Wvᵀ.
func (p *Pass) qkv(w *Weights, a *Acts) {
	s := p.Shape
	if p.fused(w.Q, w.K, w.V) &&
		device.MatMulFrozen3(p.Dev, [3]device.Buffer{a.Q, a.K, a.V}, a.XN, [3]device.Matrix{w.Q.Q, w.K.Q, w.V.Q}, p.N) {
		return
	}
	p.MatMul(a.Q, a.XN, w.Q, s.In(), s.QDim())
	p.MatMul(a.K, a.XN, w.K, s.In(), s.KVDim())
	p.MatMul(a.V, a.XN, w.V, s.In(), s.KVDim())
}

// residual: out = x + h·wᵀ, the product in prod [n×o] where it is not
// fused (a backward pass reads it).
func (p *Pass) residual(out, x, h, prod device.Buffer, w *Weight, in, o int) {
	if p.fused(w) && device.MatMulFrozenAdd(p.Dev, out, h, x, w.Q, p.N) {
		return
	}
	p.MatMul(prod, h, w, in, o)
	p.Dev.Add(out, x, prod)
}

// glu: hh = SiLU(xn2·Wgᵀ) ⊙ (xn2·Wuᵀ), with g and u kept where it is not
// fused.
func (p *Pass) glu(w *Weights, a *Acts) {
	H, F := p.Shape.Hidden, p.Shape.FFN
	if p.fused(w.Gate, w.Up) && device.MatMulFrozenGLU(p.Dev, a.HH, a.XN2, w.Gate.Q, w.Up.Q, p.N) {
		return
	}
	p.MatMul(a.G, a.XN2, w.Gate, H, F)
	p.MatMul(a.U, a.XN2, w.Up, H, F)
	p.Dev.SwiGLU(a.HH, a.G, a.U)
}

// fused reports whether the pass may multiply by ws' frozen copies in
// operations that fuse the product with what follows it: an inference
// pass (Frozen), which keeps no activations for a backward pass (AO, G, U
// and DN stay unwritten).
func (p *Pass) fused(ws ...*Weight) bool {
	for _, w := range ws {
		if !p.Frozen || w.Q == nil {
			return false
		}
	}
	return true
}

// MatMul multiplies the pass's rows of x [n×in] by w into out [n×o]: by
// its frozen copy when the pass may read one or w has nothing else, else
// by W. A model's other matrices (the draft's DGF) multiply by it too.
func (p *Pass) MatMul(out, x device.Buffer, w *Weight, in, o int) {
	if w.Q != nil && (p.Frozen || w.W == nil) {
		p.Dev.MatMulFrozen(out, x, w.Q, p.N)
		return
	}
	p.Dev.MatMul(out, x, w.W, p.N, in, o)
}
