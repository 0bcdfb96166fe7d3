package gpu

// backward propagates g.dout, the gradient of a.Out() [n×H], through the
// blocks and the DGF into the parameters' gradients (accumulated). The
// embeddings are frozen; df, when not nil, receives (+=) the gradient of
// the input features, which training-time test needs when the input was
// the draft's own earlier prediction. g.dout is used as scratch.
func (d *Draft) backward(a *acts, g *grads, pos []int, at attender, df Buffer) {
	dev, c, n := d.Dev, d.C, a.n
	H, Q, KV, F := c.Hidden, c.QDim(), c.KVDim(), c.FFN
	dout, dxin := g.dout, g.dxin
	for b := len(d.blocks) - 1; b >= 0; b-- {
		w, ba := &d.blocks[b], &a.blk[b]
		xin := a.x0
		if b > 0 {
			xin = a.blk[b-1].out
		}
		// out = mid + down(SwiGLU(gate(xn2), up(xn2))), xn2 = RMSNorm(mid)
		dev.Copy(g.dmid, dout)
		dev.Zero(g.dhh)
		dev.MatMulBackward(g.dhh, w.down.G, dout, ba.hh, w.down.W, n, F, H)
		dev.Zero(g.dg)
		dev.Zero(g.du)
		dev.SwiGLUBackward(g.dg, g.du, g.dhh, ba.g, ba.u)
		dev.Zero(g.dxn2)
		dev.MatMulBackward(g.dxn2, w.gate.G, g.dg, ba.xn2, w.gate.W, n, H, F)
		dev.MatMulBackward(g.dxn2, w.up.G, g.du, ba.xn2, w.up.W, n, H, F)
		dev.RMSNormBackward(g.dmid, w.ffnNorm.G, g.dxn2, ba.mid, w.ffnNorm.W, n, H, c.RMSEps)
		// mid = xin + o(attention(rope(q(xn)), rope(k(xn)), v(xn)))
		dev.Zero(g.datt)
		dev.MatMulBackward(g.datt, w.o.G, g.dmid, ba.att, w.o.W, n, Q, H)
		dev.Zero(g.dq)
		dev.Zero(g.dk)
		dev.Zero(g.dv)
		at.backward(d, b, ba, g.dq, g.dk, g.dv, g.datt)
		dev.RoPEBackward(g.dq, pos, c.Heads, c.HeadDim, c.RopeTheta)
		dev.RoPEBackward(g.dk, pos, c.KVHeads, c.HeadDim, c.RopeTheta)
		dev.Zero(g.dxn)
		dev.MatMulBackward(g.dxn, w.q.G, g.dq, ba.xn, w.q.W, n, H, Q)
		dev.MatMulBackward(g.dxn, w.k.G, g.dk, ba.xn, w.k.W, n, H, KV)
		dev.MatMulBackward(g.dxn, w.v.G, g.dv, ba.xn, w.v.W, n, H, KV)
		dev.Copy(dxin, g.dmid)
		if w.attnNorm != nil {
			dev.RMSNormBackward(dxin, w.attnNorm.G, g.dxn, xin, w.attnNorm.W, n, H, c.RMSEps)
		} else {
			dev.Add(dxin, dxin, g.dxn)
		}
		dout, dxin = dxin, dout
	}
	// x0 = Gate(Wz·[h1 ‖ h2], h1, h2), h1 = W1·f, h2 = SiLU(W2·RMSNorm(e))
	dev.Zero(g.dzpre)
	dev.Zero(g.dh1)
	dev.Zero(g.dh2)
	dev.GateBackward(g.dzpre, g.dh1, g.dh2, dout, a.zpre, a.h1, a.h2)
	dev.Zero(g.dcat)
	dev.MatMulBackward(g.dcat, d.wz.G, g.dzpre, a.cat, d.wz.W, n, 2*H, H)
	dev.ConcatBackward(g.dh1, g.dh2, g.dcat, n, H, H)
	dev.MatMulBackward(df, d.w1.G, g.dh1, a.f, d.w1.W, n, H, H)
	dev.Zero(g.da2)
	dev.SiLUBackward(g.da2, g.dh2, a.a2)
	dev.Zero(g.den)
	dev.MatMulBackward(g.den, d.w2.G, g.da2, a.en, d.w2.W, n, H, H)
	dev.RMSNormBackward(nil, d.embNorm.G, g.den, a.e, d.embNorm.W, n, H, c.RMSEps)
}
