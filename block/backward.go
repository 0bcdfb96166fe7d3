package block

import "dovetail/device"

// Grads is a block's backward scratch for a pass's rows: the gradients
// of its activations.
type Grads struct {
	DMid, DXN2, DG, DU, DHH, DAtt, DQ, DK, DV, DXN device.Buffer
}

// Fields lists g's buffers with their widths per row (see Acts.Fields).
func (g *Grads) Fields(s Shape) (bufs []*device.Buffer, widths []int) {
	H, F, Q, KV := s.Hidden, s.FFN, s.QDim(), s.KVDim()
	for _, f := range []struct {
		b *device.Buffer
		w int
	}{{&g.DMid, H}, {&g.DXN2, H}, {&g.DG, F}, {&g.DU, F}, {&g.DHH, F}, {&g.DAtt, Q},
		{&g.DQ, Q}, {&g.DK, KV}, {&g.DV, KV}, {&g.DXN, s.In()}} {
		bufs, widths = append(bufs, f.b), append(widths, f.w)
	}
	return bufs, widths
}

// Backward propagates dout, the gradient of a.Out [n×Hidden], through
// block i of a training pass (Frozen false: W was read): its weights'
// gradients G accumulate (+=), and dx receives (=) the gradient of its
// input x. dout is left as it was. A block whose attention reads a wider
// input than x (Shape.AttnIn) leaves that input's gradient in g.DXN for
// the caller: dx is then the residual path's alone.
func (p *Pass) Backward(i int, w *Weights, a *Acts, g *Grads, x, dout, dx device.Buffer) {
	dev, s, n := p.Dev, p.Shape, p.N
	H, Q, KV, F, in := s.Hidden, s.QDim(), s.KVDim(), s.FFN, s.In()
	// out = mid + down(SwiGLU(gate(xn2), up(xn2))), xn2 = RMSNorm(mid)
	dev.Copy(g.DMid, dout)
	dev.Zero(g.DHH)
	dev.MatMulBackward(g.DHH, w.Down.G, dout, a.HH, w.Down.W, n, F, H)
	dev.Zero(g.DG)
	dev.Zero(g.DU)
	dev.SwiGLUBackward(g.DG, g.DU, g.DHH, a.G, a.U)
	dev.Zero(g.DXN2)
	dev.MatMulBackward(g.DXN2, w.Gate.G, g.DG, a.XN2, w.Gate.W, n, H, F)
	dev.MatMulBackward(g.DXN2, w.Up.G, g.DU, a.XN2, w.Up.W, n, H, F)
	dev.RMSNormBackward(g.DMid, w.FFNNorm.G, g.DXN2, a.Mid, w.FFNNorm.W, n, H, s.RMSEps)
	// mid = x + o(attention(rope(q(xn)), rope(k(xn)), v(xn)))
	dev.Zero(g.DAtt)
	dev.MatMulBackward(g.DAtt, w.O.G, g.DMid, a.Att, w.O.W, n, Q, H)
	dev.Zero(g.DQ)
	dev.Zero(g.DK)
	dev.Zero(g.DV)
	p.Attn.AttendBackward(i, a, g.DQ, g.DK, g.DV, g.DAtt)
	p.rope(g.DQ, s.Heads, true)
	p.rope(g.DK, s.KVHeads, true)
	dev.Zero(g.DXN)
	dev.MatMulBackward(g.DXN, w.Q.G, g.DQ, a.XN, w.Q.W, n, in, Q)
	dev.MatMulBackward(g.DXN, w.K.G, g.DK, a.XN, w.K.W, n, in, KV)
	dev.MatMulBackward(g.DXN, w.V.G, g.DV, a.XN, w.V.W, n, in, KV)
	dev.Copy(dx, g.DMid)
	switch {
	case w.AttnNorm != nil:
		dev.RMSNormBackward(dx, w.AttnNorm.G, g.DXN, x, w.AttnNorm.W, n, H, s.RMSEps)
	case in == H:
		dev.Add(dx, dx, g.DXN)
	}
}
