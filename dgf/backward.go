package dgf

import (
	"dovetail/block"
	"dovetail/device"
	"dovetail/models/draft"
)

// Grads is the backward pass's scratch for a pass of up to some rows:
// the gradient of the output (DOut, which a loss fills) and of each
// activation on the way back.
type Grads struct {
	DOut, DXIn                      device.Buffer
	DZPre, DH1, DH2, DCat, DA2, DEN device.Buffer
	Block                           block.Grads
}

func (g *Grads) fields(d *Draft) (bufs []*device.Buffer, widths []int) {
	H := d.C.Hidden
	for _, f := range []struct {
		b *device.Buffer
		w int
	}{{&g.DOut, H}, {&g.DXIn, H}, {&g.DZPre, H}, {&g.DH1, H}, {&g.DH2, H}, {&g.DCat, 2 * H}, {&g.DA2, H}, {&g.DEN, H}} {
		bufs, widths = append(bufs, f.b), append(widths, f.w)
	}
	bb, bw := g.Block.Fields(d.Shape())
	return append(bufs, bb...), append(widths, bw...)
}

// NewGrads allocates a backward pass's scratch for up to rows rows.
func (d *Draft) NewGrads(rows int) *Grads {
	g := &Grads{}
	bufs, widths := g.fields(d)
	for i, b := range bufs {
		*b = d.Dev.Alloc(rows * widths[i])
	}
	return g
}

// View is g's first n rows.
func (g *Grads) View(d *Draft, n int) *Grads {
	v := &Grads{}
	src, widths := g.fields(d)
	dst, _ := v.fields(d)
	for i := range src {
		*dst[i] = d.Dev.View(*src[i], 0, n*widths[i])
	}
	return v
}

// Free releases g's buffers.
func (g *Grads) Free(d *Draft) {
	bufs, _ := g.fields(d)
	for _, b := range bufs {
		d.Dev.Free(*b)
	}
}

// Backward propagates g.DOut, the gradient of a.Out() [n×H], through the
// blocks and the DGF into the parameters' gradients (accumulated). The
// embeddings are frozen; df, when not nil, receives (+=) the gradient of
// the input features, which training-time test needs when the input was
// the draft's own earlier prediction. g.DOut is used as scratch.
//
// An EAGLE-1 draft trains as the DGF does (its fc and layers; the target's
// embeddings and head frozen). An EAGLE-3 draft does not train here: its
// loss is over its own reduced vocabulary, not the target's features.
func (d *Draft) Backward(a *Acts, g *Grads, pos []int, at block.Attention, df device.Buffer) {
	dev, c, n := d.Dev, d.C, a.N
	H := c.Hidden
	if c.Kind == draft.EAGLE3 {
		panic("dgf: an EAGLE-3 draft has no backward pass")
	}
	p := block.Pass{Dev: dev, Shape: d.Shape(), N: n, Pos: pos, Attn: at, RopeFreqs: d.RopeFreqs}
	dout, dxin := g.DOut, g.DXIn
	for b := len(d.blocks) - 1; b >= 0; b-- {
		xin := a.X0
		if b > 0 {
			xin = a.Blocks[b-1].Out
		}
		p.Backward(b, &d.blocks[b], &a.Blocks[b], &g.Block, xin, dout, dxin)
		dout, dxin = dxin, dout
	}
	if c.Kind == draft.EAGLE1 {
		d.backwardEAGLE1(a, g, dout, df)
		return
	}
	// x0 = Gate(Wz·[h1 ‖ h2], h1, h2), h1 = W1·f, h2 = SiLU(W2·RMSNorm(e))
	dev.Zero(g.DZPre)
	dev.Zero(g.DH1)
	dev.Zero(g.DH2)
	dev.GateBackward(g.DZPre, g.DH1, g.DH2, dout, a.ZPre, a.H1, a.H2)
	dev.Zero(g.DCat)
	dev.MatMulBackward(g.DCat, d.wz.G, g.DZPre, a.Cat, d.wz.W, n, 2*H, H)
	dev.ConcatBackward(g.DH1, g.DH2, g.DCat, n, H, H)
	dev.MatMulBackward(df, d.w1.G, g.DH1, a.F, d.w1.W, n, H, H)
	dev.Zero(g.DA2)
	dev.SiLUBackward(g.DA2, g.DH2, a.A2)
	dev.Zero(g.DEN)
	dev.MatMulBackward(g.DEN, d.w2.G, g.DA2, a.EN, d.w2.W, n, H, H)
	dev.RMSNormBackward(nil, d.embNorm.G, g.DEN, a.E, d.embNorm.W, n, H, c.RMSEps)
}

// backwardEAGLE1 propagates dout, the gradient of x0, through fc:
// x0 = fc·[e ‖ f] + b.
func (d *Draft) backwardEAGLE1(a *Acts, g *Grads, dout, df device.Buffer) {
	dev, H, n := d.Dev, d.C.Hidden, a.N
	if d.fcBias != nil {
		dev.MatMulBackward(nil, d.fcBias.G, dout, a.Ones, d.fcBias.W, n, 1, H)
	}
	dev.Zero(g.DCat)
	dev.MatMulBackward(g.DCat, d.fc.G, dout, a.Cat, d.fc.W, n, 2*H, H)
	if df != nil {
		dev.ConcatBackward(nil, df, g.DCat, n, H, H)
	}
}
