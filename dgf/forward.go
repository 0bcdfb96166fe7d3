package dgf

import (
	"dovetail/block"
	"dovetail/device"
	"dovetail/models/draft"
)

// Acts are the activations of one pass of the draft over N rows, kept for
// the backward pass: the fusion's (the DGF's, or an EAGLE draft's fc) and
// each block's. F holds the pass's input features. Drafting passes send
// their keys and values to a KV cache, training passes keep them in their
// own buffers. Which buffers a pass has depends on the draft's kind.
type Acts struct {
	N        int
	Drafting bool // keys and values go to a cache: the matrices' Q8_0 copies may serve
	// Predicted says F holds the draft's own predicted states (EAGLE-3's
	// tree nodes, H wide), which its layer reads as they are; else F holds
	// the target's features, which fc fuses.
	Predicted                           bool
	F, E, EN, H1, A2, H2, Cat, ZPre, X0 device.Buffer // DGF (EAGLE-1: F, E, Cat, X0)
	B, Ones                             device.Buffer // EAGLE-1's bias: ones · bias, and the ones
	G, GN, ON                           device.Buffer // EAGLE-3: fc's output, its norm, the output's norm
	Blocks                              []block.Acts
}

// Out is the predicted feature f̂ of every row (the last block's output).
func (a *Acts) Out() device.Buffer { return a.Blocks[len(a.Blocks)-1].Out }

// fields lists the buffers of a with their widths per row (probs: per
// block, given separately). withKV includes k and v.
func (a *Acts) fields(c draft.Config, s block.Shape, withKV bool) (bufs []*device.Buffer, widths []int) {
	H := c.Hidden
	add := func(b *device.Buffer, w int) { bufs, widths = append(bufs, b), append(widths, w) }
	add(&a.F, c.FeatureIn())
	add(&a.E, H)
	add(&a.Cat, 2*H)
	switch c.Kind {
	case draft.EAGLE1:
		add(&a.X0, H)
		if c.FCBias {
			add(&a.B, H)
			add(&a.Ones, 1)
		}
	case draft.EAGLE3:
		for _, b := range []*device.Buffer{&a.EN, &a.G, &a.GN, &a.ON} {
			add(b, H)
		}
	default:
		for _, b := range []*device.Buffer{&a.EN, &a.H1, &a.A2, &a.H2, &a.ZPre, &a.X0} {
			add(b, H)
		}
	}
	for b := range a.Blocks {
		bb, bw := a.Blocks[b].Fields(s, b > 0, withKV)
		bufs, widths = append(bufs, bb...), append(widths, bw...)
	}
	return bufs, widths
}

// firstIn is what block 0's attention reads: the fusion's output, or
// EAGLE-3's [normed embedding ‖ normed state].
func (a *Acts) firstIn(c draft.Config) device.Buffer {
	if c.Kind == draft.EAGLE3 {
		return a.Cat
	}
	return a.X0
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
			a.Blocks[b].XN = a.firstIn(d.C)
		}
	}
	if a.Ones != nil {
		ones := make([]float32, rows)
		for i := range ones {
			ones[i] = 1
		}
		d.Dev.Upload(a.Ones, ones)
	}
	return a
}

// View is a's first n rows and probs attention weights; withKV as a was
// made.
func (a *Acts) View(d *Draft, n, probs int, withKV bool) *Acts {
	dev := d.Dev
	v := &Acts{N: n, Drafting: a.Drafting, Predicted: a.Predicted, Blocks: make([]block.Acts, len(a.Blocks))}
	src, widths := a.fields(d.C, d.Shape(), withKV)
	dst, _ := v.fields(d.C, d.Shape(), withKV)
	for i := range src {
		*dst[i] = dev.View(*src[i], 0, n*widths[i])
	}
	for b := range v.Blocks {
		v.Blocks[b].Probs = dev.View(a.Blocks[b].Probs, 0, probs)
		if b == 0 {
			v.Blocks[b].XN = v.firstIn(d.C)
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

// Forward runs the fusion and the blocks over a.N rows: a.F holds the
// input features; tokens are the inputs' next tokens (x_{t+1}) and pos the
// RoPE positions; at runs attention (a cache and a tree when drafting, a
// batch's windows when training). The predicted features end in a.Out().
func (d *Draft) Forward(a *Acts, tokens, pos []int, at block.Attention) {
	p := block.Pass{Dev: d.Dev, Shape: d.Shape(), N: a.N, Pos: pos, Attn: at, Frozen: a.Drafting, RopeFreqs: d.RopeFreqs}
	d.Dev.Embed(a.E, d.Embd, tokens)
	var x device.Buffer
	switch d.C.Kind {
	case draft.EAGLE1:
		x = d.fuseEAGLE1(&p, a)
	case draft.EAGLE3:
		x = d.fuseEAGLE3(&p, a)
	default:
		x = d.fuseDGF(&p, a)
	}
	for b := range d.blocks {
		p.Forward(b, &d.blocks[b], &a.Blocks[b], x)
		x = a.Blocks[b].Out
	}
}

// fuseDGF is the Dynamic Gated Fusion; block 0 reads x0.
//
//	h1 = W1·f, h2 = SiLU(W2·RMSNorm(e)), z = σ(Wz·[h1 ‖ h2])
//	x0 = z⊙h1 + (1−z)⊙h2
func (d *Draft) fuseDGF(p *block.Pass, a *Acts) device.Buffer {
	dev, c, n := d.Dev, d.C, a.N
	H := c.Hidden
	dev.RMSNorm(a.EN, a.E, d.embNorm.W, n, H, c.RMSEps)
	p.MatMul(a.H1, a.F, &d.w1.Weight, H, H)
	p.MatMul(a.A2, a.EN, &d.w2.Weight, H, H)
	dev.SiLU(a.H2, a.A2)
	dev.Concat(a.Cat, a.H1, a.H2, n, H, H)
	p.MatMul(a.ZPre, a.Cat, &d.wz.Weight, 2*H, H)
	dev.Gate(a.X0, a.ZPre, a.H1, a.H2)
	return a.X0
}

// fuseEAGLE1 is EAGLE's fc over the embedding and the feature (in that
// order, as EAGLE's code concatenates them); block 0 reads x0.
//
//	x0 = fc·[e ‖ f] + b
func (d *Draft) fuseEAGLE1(p *block.Pass, a *Acts) device.Buffer {
	dev, H, n := d.Dev, d.C.Hidden, a.N
	dev.Concat(a.Cat, a.E, a.F, n, H, H)
	p.MatMul(a.X0, a.Cat, &d.fc.Weight, 2*H, H)
	if d.fcBias != nil {
		dev.MatMul(a.B, a.Ones, d.fcBias.W, n, 1, H) // every row the bias
		dev.Add(a.X0, a.X0, a.B)
	}
	return a.X0
}

// fuseEAGLE3 is EAGLE-3's input: the target's three layers fused by fc (or
// the draft's own predicted state, as it is), and beside it the embedding,
// each normed; the layer's residual stream is the state g.
//
//	g = fc·[l ‖ m ‖ h]  (target features)   or  g = f̂  (predicted)
//	attention reads [RMSNorm(e) ‖ RMSNorm(g)]
func (d *Draft) fuseEAGLE3(p *block.Pass, a *Acts) device.Buffer {
	dev, c, n := d.Dev, d.C, a.N
	H := c.Hidden
	g := a.G
	if a.Predicted {
		g = dev.View(a.F, 0, n*H)
	} else {
		p.MatMul(a.G, a.F, &d.fc.Weight, 3*H, H)
	}
	dev.RMSNorm(a.EN, a.E, d.inNorm.W, n, H, c.RMSEps)
	dev.RMSNorm(a.GN, g, d.hiddenNorm.W, n, H, c.RMSEps)
	dev.Concat(a.Cat, a.EN, a.GN, n, H, H)
	return g
}

// Logits puts the logits of n predicted features out [n×H] into lg
// [n×HeadVocab]: the target's head (DGF, EAGLE-1), or EAGLE-3's own norm
// (into on [n×H]) and head, in its Q8_0 copy when frozen.
func (d *Draft) Logits(lg, out, on device.Buffer, n int, frozen bool) {
	if d.C.Kind != draft.EAGLE3 {
		d.Dev.MatMulFrozen(lg, out, d.Head, n)
		return
	}
	H := d.C.Hidden
	d.Dev.RMSNorm(on, out, d.outNorm.W, n, H, d.C.RMSEps)
	p := block.Pass{Dev: d.Dev, N: n, Frozen: frozen}
	p.MatMul(lg, on, &d.out.Weight, H, d.C.HeadVocab())
}
