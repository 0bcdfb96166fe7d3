package dgf

import (
	"dovetail/block"
	"dovetail/device"
	"dovetail/models/draft"
)

// Acts are the activations of one pass of the draft over N rows, kept for
// the backward pass: the DGF's (X0 feeds block 0) and each block's.
// F holds the pass's input features. Drafting passes send their keys and
// values to a KV cache, training passes keep them in their own buffers.
type Acts struct {
	N                                   int
	Drafting                            bool // keys and values go to a cache: the matrices' Q8_0 copies may serve
	F, E, EN, H1, A2, H2, Cat, ZPre, X0 device.Buffer
	Blocks                              []block.Acts
}

// Out is the predicted feature f̂ of every row (the last block's output).
func (a *Acts) Out() device.Buffer { return a.Blocks[len(a.Blocks)-1].Out }

// fields lists the buffers of a with their widths per row (probs: per
// block, given separately). withKV includes k and v.
func (a *Acts) fields(c draft.Config, s block.Shape, withKV bool) (bufs []*device.Buffer, widths []int) {
	H := c.Hidden
	for _, f := range []struct {
		b *device.Buffer
		w int
	}{{&a.F, H}, {&a.E, H}, {&a.EN, H}, {&a.H1, H}, {&a.A2, H}, {&a.H2, H}, {&a.Cat, 2 * H}, {&a.ZPre, H}, {&a.X0, H}} {
		bufs, widths = append(bufs, f.b), append(widths, f.w)
	}
	for b := range a.Blocks {
		bb, bw := a.Blocks[b].Fields(s, b > 0, withKV)
		bufs, widths = append(bufs, bb...), append(widths, bw...)
	}
	return bufs, widths
}

// NewActs allocates activations for up to rows rows and probs attention
// weights per block; withKV gives them keys and values of their own (a
// training pass), else they are a drafting pass's.
func (d *Draft) NewActs(rows, probs int, withKV bool) *Acts {
	a := &Acts{N: rows, Drafting: !withKV, Blocks: make([]block.Acts, d.C.Blocks)}
	bufs, widths := a.fields(d.C, d.Shape(), withKV)
	for i, b := range bufs {
		*b = d.Dev.Alloc(rows * widths[i])
	}
	for b := range a.Blocks {
		a.Blocks[b].Probs = d.Dev.Alloc(max(probs, 1))
		if b == 0 {
			a.Blocks[b].XN = a.X0
		}
	}
	return a
}

// View is a's first n rows and probs attention weights; withKV as a was
// made.
func (a *Acts) View(d *Draft, n, probs int, withKV bool) *Acts {
	dev := d.Dev
	v := &Acts{N: n, Drafting: a.Drafting, Blocks: make([]block.Acts, len(a.Blocks))}
	src, widths := a.fields(d.C, d.Shape(), withKV)
	dst, _ := v.fields(d.C, d.Shape(), withKV)
	for i := range src {
		*dst[i] = dev.View(*src[i], 0, n*widths[i])
	}
	for b := range v.Blocks {
		v.Blocks[b].Probs = dev.View(a.Blocks[b].Probs, 0, probs)
		if b == 0 {
			v.Blocks[b].XN = v.X0
		}
	}
	return v
}

// Free releases a's buffers; withKV as a was made.
func (a *Acts) Free(d *Draft, withKV bool) {
	bufs, _ := a.fields(d.C, d.Shape(), withKV)
	for _, b := range bufs {
		d.Dev.Free(*b)
	}
	for _, ba := range a.Blocks {
		d.Dev.Free(ba.Probs)
	}
}

// Forward runs the DGF and the blocks over a.N rows: a.F holds the input
// features; tokens are the inputs' next tokens (x_{t+1}) and pos the RoPE
// positions; at runs attention (a cache and a tree when drafting, a
// batch's windows when training). The predicted features end in a.Out().
//
//	h1 = W1·f, h2 = SiLU(W2·RMSNorm(e)), z = σ(Wz·[h1 ‖ h2])
//	x0 = z⊙h1 + (1−z)⊙h2, then the blocks
func (d *Draft) Forward(a *Acts, tokens, pos []int, at block.Attention) {
	dev, c, n := d.Dev, d.C, a.N
	H := c.Hidden
	p := block.Pass{Dev: dev, Shape: d.Shape(), N: n, Pos: pos, Attn: at, Frozen: a.Drafting}
	dev.Embed(a.E, d.Embd, tokens)
	dev.RMSNorm(a.EN, a.E, d.embNorm.W, n, H, c.RMSEps)
	p.MatMul(a.H1, a.F, &d.w1.Weight, H, H)
	p.MatMul(a.A2, a.EN, &d.w2.Weight, H, H)
	dev.SiLU(a.H2, a.A2)
	dev.Concat(a.Cat, a.H1, a.H2, n, H, H)
	p.MatMul(a.ZPre, a.Cat, &d.wz.Weight, 2*H, H)
	dev.Gate(a.X0, a.ZPre, a.H1, a.H2)
	x := a.X0
	for b := range d.blocks {
		p.Forward(b, &d.blocks[b], &a.Blocks[b], x)
		x = a.Blocks[b].Out
	}
}
