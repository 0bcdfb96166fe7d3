package cuda

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"dovetail/device"
	"dovetail/internal/topk"
)

// The operations of the CUDA device: matrix products through cuBLAS (or
// the gemm kernel), the rest as kernels of kernels.cu. Shapes are
// checked here as the host device checks them, so that a caller's mistake
// panics with a message instead of reading past a buffer on the GPU.

func (d *cudaDev) need(op string, want int, bufs ...device.Buffer) {
	for i, x := range bufs {
		if x != nil && x.Len() < want {
			panic(fmt.Sprintf("cuda: %s: argument %d holds %d values, need %d", op, i, x.Len(), want))
		}
	}
}

// gemm: C[M×N] = op(A)·op(B) + beta·C, row-major, op transposing when ta
// (tb) is set: op(A)[i,k] = A[k·lda+i]. cuBLAS is column-major: there the
// same memory is Cᵀ = op(B)ᵀ·op(A)ᵀ.
func (d *cudaDev) gemm(c, a, b uint64, m, n, k, lda, ldb, ldc int, ta, tb bool, beta float32) {
	if m == 0 || n == 0 {
		return
	}
	if d.handle != 0 {
		op := func(t bool) uintptr {
			if t {
				return 1 // CUBLAS_OP_T
			}
			return 0
		}
		d.streamWork()
		betaP := &d.args.one[0] // 1
		if beta == 0 {
			betaP = &d.args.one[1]
		}
		r := d.l.call(d.c.blas.sgemm, d.handle, op(tb), op(ta), uintptr(n), uintptr(m), uintptr(k),
			uintptr(unsafe.Pointer(&d.args.one[0])), uintptr(b), uintptr(ldb), uintptr(a), uintptr(lda),
			uintptr(unsafe.Pointer(betaP)), uintptr(c), uintptr(ldc))
		if r != 0 {
			panic(fmt.Sprintf("cuda: cublasSgemm: status %d", r))
		}
		return
	}
	bool32 := func(t bool) i32 {
		if t {
			return 1
		}
		return 0
	}
	const tile = 16
	d.launch("gemm", [3]int{(n + tile - 1) / tile, (m + tile - 1) / tile}, [3]int{tile, tile}, 0,
		c, a, b, i32(m), i32(n), i32(k), i32(lda), i32(ldb), i32(ldc), bool32(ta), bool32(tb), f32(beta))
}

func (d *cudaDev) MatMul(out, x, w device.Buffer, n, in, o int) {
	d.need("MatMul", n*o, out)
	d.need("MatMul", n*in, x)
	d.need("MatMul", o*in, w)
	d.enter()
	defer d.leave()
	d.gemm(d.ptr(out), d.ptr(x), d.ptr(w), n, o, in, in, in, o, false, true, 0)
}

func (d *cudaDev) MatMulBackward(dx, dw, dout, x, w device.Buffer, n, in, o int) {
	d.need("MatMulBackward", n*o, dout)
	d.enter()
	defer d.leave()
	if dx != nil {
		d.need("MatMulBackward", n*in, dx)
		d.need("MatMulBackward", o*in, w)
		// dx[n×in] += dout[n×o]·w[o×in]
		d.gemm(d.ptr(dx), d.ptr(dout), d.ptr(w), n, in, o, o, in, in, false, false, 1)
	}
	if dw != nil {
		d.need("MatMulBackward", o*in, dw)
		d.need("MatMulBackward", n*in, x)
		// dw[o×in] += doutᵀ·x
		d.gemm(d.ptr(dw), d.ptr(dout), d.ptr(x), o, in, n, o, in, in, true, false, 1)
	}
}

func (d *cudaDev) MatMulFrozen(out, x device.Buffer, w device.Matrix, n int) {
	m := d.mat(w)
	d.need("MatMulFrozen", n*m.rows, out)
	d.need("MatMulFrozen", n*m.cols, x)
	d.enter()
	defer d.leave()
	if m.raw != 0 {
		d.blockProduct(d.ptr(out), d.ptr(x), m, n, 0)
		return
	}
	d.gemm(d.ptr(out), d.ptr(x), m.buf.p, n, m.rows, m.cols, m.cols, m.cols, m.rows, false, true, 0)
}

// MatMulFrozenAdd: out = add + x·Wᵀ in one launch where W is in its blocks
// (device.MatMulFrozenAdd); float matrices go to gemm with add as its C.
func (d *cudaDev) MatMulFrozenAdd(out, x, add device.Buffer, w device.Matrix, n int) bool {
	m := d.mat(w)
	d.need("MatMulFrozenAdd", n*m.rows, out, add)
	d.need("MatMulFrozenAdd", n*m.cols, x)
	d.enter()
	defer d.leave()
	if m.raw != 0 {
		d.blockProduct(d.ptr(out), d.ptr(x), m, n, d.ptr(add))
		return true
	}
	d.copyBytes(d.ptr(out), d.ptr(add), 4*n*m.rows)
	d.gemm(d.ptr(out), d.ptr(x), m.buf.p, n, m.rows, m.cols, m.cols, m.cols, m.rows, false, true, 1)
	return true
}

// MatMulFrozen3: three products of the same x in one launch (per 8 rows)
// where the matrices are in their blocks of 8-bit formats and the rows
// few enough for mmvq (device.MatMulFrozen3); false elsewhere.
func (d *cudaDev) MatMulFrozen3(outs [3]device.Buffer, x device.Buffer, ws [3]device.Matrix, n int) bool {
	var ms [3]*cudaMat
	for i, w := range ws {
		ms[i] = d.mat(w)
		if m := ms[i]; m.raw == 0 || blockFormats[m.typ].float || m.cols != ms[0].cols || n > mmvRows {
			return false
		}
		d.need("MatMulFrozen3", n*ms[i].rows, outs[i])
	}
	K := ms[0].cols
	d.need("MatMulFrozen3", n*K, x)
	d.enter()
	defer d.leave()
	var o [3]uint64
	for i := range o {
		o[i] = d.ptr(outs[i])
	}
	d.product3(o, d.ptr(x), ms, n)
	return true
}

// MatMulFrozenGLU: out = SiLU(x·Gᵀ) ⊙ (x·Uᵀ) in one launch (per 8 rows)
// where G and U are in their blocks of one 8-bit format and the rows are
// few enough for mmvq (device.MatMulFrozenGLU); false elsewhere.
func (d *cudaDev) MatMulFrozenGLU(out, x device.Buffer, gate, up device.Matrix, n int) bool {
	g, u := d.mat(gate), d.mat(up)
	if g.raw == 0 || u.raw == 0 || g.typ != u.typ || blockFormats[g.typ].float || g.rows != u.rows ||
		g.cols != u.cols || n > mmvRows {
		return false
	}
	d.need("MatMulFrozenGLU", n*g.rows, out)
	d.need("MatMulFrozenGLU", n*g.cols, x)
	d.enter()
	defer d.leave()
	d.gluProduct(d.ptr(out), d.ptr(x), g, u, n)
	return true
}

func (d *cudaDev) MatMulFrozenBackward(dx, dout device.Buffer, w device.Matrix, n int) {
	m := d.mat(w)
	d.need("MatMulFrozenBackward", n*m.cols, dx)
	d.need("MatMulFrozenBackward", n*m.rows, dout)
	d.enter()
	defer d.leave()
	if m.raw != 0 {
		d.blockProductBackward(d.ptr(dx), d.ptr(dout), m, n)
		return
	}
	d.gemm(d.ptr(dx), d.ptr(dout), m.buf.p, n, m.cols, m.rows, m.rows, m.cols, m.cols, false, false, 1)
}

func (d *cudaDev) Embed(out device.Buffer, table device.Matrix, tokens []int) {
	m := d.mat(table)
	d.need("Embed", len(tokens)*m.cols, out)
	for _, tok := range tokens {
		if tok < 0 || tok >= m.rows {
			panic(fmt.Sprintf("cuda: Embed: token %d outside [0, %d)", tok, m.rows))
		}
	}
	d.enter()
	defer d.leave()
	toks := hostArgs(d, int32s(tokens))
	if m.raw != 0 {
		d.dequantRows(d.ptr(out), m, toks, 0, len(tokens))
		return
	}
	d.elems("embed", len(tokens)*m.cols, d.ptr(out), m.buf.p, toks, i32(len(tokens)), i32(m.cols))
}

func (d *cudaDev) RMSNorm(out, x, w device.Buffer, n, c int, eps float32) {
	d.need("RMSNorm", n*c, out, x)
	d.need("RMSNorm", c, w)
	d.enter()
	defer d.leave()
	if c%32 != 0 || n > mmvRows {
		d.rows("rmsnorm", n, 0, d.ptr(out), d.ptr(x), d.ptr(w), i32(c), f32(eps))
		return
	}
	// The products that read out next (a layer's Q, K and V; its gate
	// and up) would quantize it to 8 bits first: that is made here in the
	// same launch (d.quantized finds it).
	o := d.ptr(out)
	xq := d.scratchBytes(3, n*c+8*(n*c/32))
	d.rows("rmsnorm_q8", n, 0, o, xq, ds0(xq, n, c), d.ptr(x), d.ptr(w), i32(c), f32(eps))
	d.q8 = q8Memo{x: o, n: n, k: c, ops: d.ops, codes: xq}
}

func (d *cudaDev) RMSNormBackward(dx, dw, dout, x, w device.Buffer, n, c int, eps float32) {
	d.need("RMSNormBackward", n*c, dx, dout, x)
	d.need("RMSNormBackward", c, dw, w)
	d.enter()
	defer d.leave()
	rstd := d.scratchBytes(1, 4*n)
	d.rows("rmsnorm_backward_x", n, 0, d.ptr(dx), rstd, d.ptr(dout), d.ptr(x), d.ptr(w), i32(c), f32(eps))
	if dw != nil {
		d.elems("rmsnorm_backward_w", c, d.ptr(dw), rstd, d.ptr(dout), d.ptr(x), i32(n), i32(c))
	}
}

// pointwise launches an elementwise kernel over n values, after checking
// that every buffer holds as many.
func (d *cudaDev) pointwise(op, kernel string, n int, bufs ...device.Buffer) {
	d.need(op, n, bufs...)
	d.enter()
	defer d.leave()
	args := make([]any, 0, len(bufs)+1)
	for _, b := range bufs {
		args = append(args, d.ptr(b))
	}
	d.elems(kernel, n, append(args, n)...)
}

func (d *cudaDev) SiLU(out, x device.Buffer) { d.pointwise("SiLU", "silu", x.Len(), out, x) }
func (d *cudaDev) SiLUBackward(dx, dout, x device.Buffer) {
	d.pointwise("SiLUBackward", "silu_backward", x.Len(), dx, dout, x)
}
func (d *cudaDev) SwiGLU(out, gate, up device.Buffer) {
	d.pointwise("SwiGLU", "swiglu", gate.Len(), out, gate, up)
}
func (d *cudaDev) Add(out, a, b device.Buffer) { d.pointwise("Add", "add", a.Len(), out, a, b) }
func (d *cudaDev) Gate(out, zpre, h1, h2 device.Buffer) {
	d.pointwise("Gate", "gate", zpre.Len(), out, zpre, h1, h2)
}

func (d *cudaDev) SwiGLUBackward(dgate, dup, dout, gate, up device.Buffer) {
	d.pointwise("SwiGLUBackward", "swiglu_backward", gate.Len(), dgate, dup, dout, gate, up)
}

func (d *cudaDev) GateBackward(dzpre, dh1, dh2, dout, zpre, h1, h2 device.Buffer) {
	d.pointwise("GateBackward", "gate_backward", zpre.Len(), dzpre, dh1, dh2, dout, zpre, h1, h2)
}

func (d *cudaDev) Concat(out, a, b device.Buffer, n, ca, cb int) {
	d.need("Concat", n*(ca+cb), out)
	d.need("Concat", n*ca, a)
	d.need("Concat", n*cb, b)
	d.enter()
	defer d.leave()
	d.elems("concat", n*(ca+cb), d.ptr(out), d.ptr(a), d.ptr(b), i32(n), i32(ca), i32(cb), i32(0))
}

func (d *cudaDev) ConcatBackward(da, db, dout device.Buffer, n, ca, cb int) {
	d.need("ConcatBackward", n*(ca+cb), dout)
	d.need("ConcatBackward", n*ca, da)
	d.need("ConcatBackward", n*cb, db)
	d.enter()
	defer d.leave()
	d.elems("concat", n*(ca+cb), d.ptr(dout), d.ptr(da), d.ptr(db), i32(n), i32(ca), i32(cb), i32(1))
}

func (d *cudaDev) rope(op string, x device.Buffer, pos []int, heads, hd int, theta float32, freqs []float32, sign float32) {
	d.need(op, len(pos)*heads*hd, x)
	checkRoPE(op, hd, freqs)
	d.enter()
	defer d.leave()
	p, f := d.ropeArgs(pos, hd, freqs)
	d.elems("rope", len(pos)*heads*hd/2, d.ptr(x), p, f, i32(len(pos)), i32(heads), i32(hd), f32(theta), f32(sign))
}

// RoPEQK rotates queries and keys in one launch (device.RoPEQK).
func (d *cudaDev) RoPEQK(q, k device.Buffer, pos []int, heads, kvHeads, hd int, theta float32, freqs []float32) bool {
	d.need("RoPEQK", len(pos)*heads*hd, q)
	d.need("RoPEQK", len(pos)*kvHeads*hd, k)
	checkRoPE("RoPEQK", hd, freqs)
	d.enter()
	defer d.leave()
	p, f := d.ropeArgs(pos, hd, freqs)
	d.elems("rope_qk", len(pos)*(heads+kvHeads)*hd/2, d.ptr(q), d.ptr(k), p, f, i32(len(pos)), i32(heads),
		i32(kvHeads), i32(hd), f32(theta))
	return true
}

func checkRoPE(op string, hd int, freqs []float32) {
	if hd%2 != 0 {
		panic(fmt.Sprintf("cuda: %s: odd head dimension %d", op, hd))
	}
	if freqs != nil && len(freqs) < hd/2 {
		panic(fmt.Sprintf("cuda: %s: %d frequency factors for %d pairs", op, len(freqs), hd/2))
	}
}

// ropeArgs uploads a RoPE's positions and frequency factors (0: none).
func (d *cudaDev) ropeArgs(pos []int, hd int, freqs []float32) (p, f uint64) {
	p = hostArgs(d, int32s(pos))
	if freqs != nil {
		f = hostArgs(d, freqs[:hd/2])
	}
	return p, f
}

var _ device.FreqRoPE = (*cudaDev)(nil)

// RoPEFreqs: device.FreqRoPE.
func (d *cudaDev) RoPEFreqs(x device.Buffer, pos []int, heads, hd int, theta float32, freqs []float32) {
	d.rope("RoPEFreqs", x, pos, heads, hd, theta, freqs, 1)
}

func (d *cudaDev) RoPEFreqsBackward(dx device.Buffer, pos []int, heads, hd int, theta float32, freqs []float32) {
	d.rope("RoPEFreqsBackward", dx, pos, heads, hd, theta, freqs, -1)
}

func (d *cudaDev) RoPE(x device.Buffer, pos []int, heads, hd int, theta float32) {
	d.rope("RoPE", x, pos, heads, hd, theta, nil, 1)
}

func (d *cudaDev) RoPEBackward(dx device.Buffer, pos []int, heads, hd int, theta float32) {
	d.rope("RoPEBackward", dx, pos, heads, hd, theta, nil, -1)
}

// mask uploads an attention mask, or returns 0 for a causal one.
func (d *cudaDev) mask(a device.Attn) uint64 {
	if a.Mask == nil {
		return 0
	}
	return hostArgs(d, a.Mask[:a.Rows*a.Pend])
}

func (d *cudaDev) Attention(out, probs, q, k, v device.Buffer, a device.Attn) {
	a.Check("Attention")
	qd, kvd := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	d.need("Attention", a.Rows*qd, out, q)
	d.need("Attention", a.Rows*a.Heads*a.Keys(), probs)
	d.need("Attention", a.Keys()*kvd, k, v)
	kernel := "attention"
	if kb, vb := d.b(k), d.b(v); kb.half || vb.half {
		if !kb.half || !vb.half {
			panic("cuda: Attention: keys and values of different precisions")
		}
		kernel = "attention_h"
	}
	d.f32("Attention", out)
	d.f32("Attention", q)
	d.enter()
	defer d.leave()
	// The output product reads out next: its 8-bit codes are made here
	// (d.quantized finds them) where each warp's 32 values are a sub-block.
	var xq, ds uint64
	if a.HeadDim%32 == 0 && a.Rows <= mmvRows {
		xq = d.scratchBytes(3, a.Rows*qd+8*(a.Rows*qd/32))
		ds = ds0(xq, a.Rows, qd)
	}
	// past and pend from device memory: a step's graph keeps the
	// launch's arguments (graph.go).
	pp := hostArgs(d, []int32{int32(a.Past), int32(a.Pend)})
	d.launch(kernel, [3]int{a.Rows, a.Heads}, [3]int{cudaBS}, 4*a.HeadDim,
		d.ptr(out), d.ptr(probs), d.ptr(q), d.ptr(k), d.ptr(v), d.mask(a),
		i32(a.Heads), i32(a.KVHeads), i32(a.HeadDim), pp, i32(a.Rows), xq, ds)
	if xq != 0 {
		d.q8 = q8Memo{x: d.ptr(out), n: a.Rows, k: qd, ops: d.ops, codes: xq}
	}
}

func (d *cudaDev) AttentionBackward(dq, dk, dv, dout, probs, q, k, v device.Buffer, a device.Attn) {
	a.Check("AttentionBackward")
	qd, kvd := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	d.need("AttentionBackward", a.Rows*qd, dq, dout, q)
	d.need("AttentionBackward", a.Rows*a.Heads*a.Keys(), probs)
	d.need("AttentionBackward", a.Keys()*kvd, dk, dv, k, v)
	d.f32("AttentionBackward", k)
	d.f32("AttentionBackward", v)
	d.enter()
	defer d.leave()
	ds := d.scratchBytes(1, 4*a.Rows*a.Heads*a.Keys())
	d.launch("attention_backward", [3]int{a.Rows, a.Heads}, [3]int{cudaBS}, 8*a.HeadDim,
		d.ptr(dq), d.ptr(dk), d.ptr(dv), ds, d.ptr(dout), d.ptr(probs), d.ptr(q), d.ptr(k), d.ptr(v),
		i32(a.Heads), i32(a.KVHeads), i32(a.HeadDim), i32(a.Past), i32(a.Pend))
}

func (d *cudaDev) SmoothL1(dpred, loss, pred, target device.Buffer, n, c int, scale float32) {
	d.need("SmoothL1", n*c, dpred, pred, target)
	d.need("SmoothL1", n, loss)
	d.enter()
	defer d.leave()
	d.rows("smoothl1", n, 0, d.ptr(dpred), d.ptr(loss), d.ptr(pred), d.ptr(target), i32(c), f32(scale))
}

func (d *cudaDev) SoftCrossEntropy(dlogits, loss, agree, logits, target device.Buffer, n, v int, scale float32) {
	d.need("SoftCrossEntropy", n*v, dlogits, logits, target)
	d.need("SoftCrossEntropy", n, loss, agree)
	d.enter()
	defer d.leave()
	d.rows("soft_cross_entropy", n, 0, d.ptr(dlogits), d.ptr(loss), d.ptr(agree), d.ptr(logits), d.ptr(target),
		i32(v), f32(scale))
}

func (d *cudaDev) TopK(top []topk.Choice, logits device.Buffer, n, v, k int, scale float32) {
	d.need("TopK", n*v, logits)
	if k > v || len(top) < n*k {
		panic(fmt.Sprintf("cuda: TopK: %d of %d values into %d choices for %d rows", k, v, len(top), n))
	}
	if n == 0 || k == 0 {
		return
	}
	d.enter()
	defer d.leave()
	out := d.scratchBytes(2, 8*n*k) // n·k ids, then n·k log-probabilities
	d.rows("topk", n, 0, out, out+uint64(4*n*k), d.ptr(logits), i32(v), i32(k), f32(scale))
	d.topHost = slices.Grow(d.topHost[:0], 2*n*k)[:2*n*k]
	d.download(unsafe.Pointer(&d.topHost[0]), out, 8*n*k)
	for i := range n * k {
		top[i] = topk.Choice{Token: int(int32(d.topHost[i])), LogP: float64(math.Float32frombits(d.topHost[n*k+i]))}
	}
}

// sum adds b's values (squared with sq) in double: partial sums per block
// on the GPU, then the host adds those.
func (d *cudaDev) sum(b device.Buffer, sq bool) float64 {
	n := b.Len()
	if n == 0 {
		return 0
	}
	d.enter()
	defer d.leave()
	blocks := min(1024, (n+cudaBS-1)/cudaBS)
	part := d.scratchBytes(2, 8*blocks)
	s := i32(0)
	if sq {
		s = 1
	}
	d.launch("sum", [3]int{blocks}, [3]int{cudaBS}, 0, part, d.ptr(b), n, s)
	if cap(d.partial) < blocks {
		d.partial = make([]float64, blocks)
	}
	p := d.partial[:blocks]
	d.download(unsafe.Pointer(&p[0]), part, 8*blocks)
	var t float64
	for _, v := range p {
		t += v
	}
	return t
}

func (d *cudaDev) Sum(b device.Buffer) float64        { return d.sum(b, false) }
func (d *cudaDev) SumSquares(b device.Buffer) float64 { return d.sum(b, true) }

func (d *cudaDev) AdamWUpdate(param, grad, m, v device.Buffer, p device.AdamW, decay bool) {
	n := param.Len()
	d.need("AdamWUpdate", n, grad, m, v)
	c1 := 1 - math.Pow(float64(p.Beta1), float64(p.Step))
	c2 := 1 - math.Pow(float64(p.Beta2), float64(p.Step))
	dec := i32(0)
	if decay {
		dec = 1
	}
	d.enter()
	defer d.leave()
	d.elems("adamw", n, d.ptr(param), d.ptr(grad), d.ptr(m), d.ptr(v), n, f32(p.LR), f32(p.Beta1), f32(p.Beta2),
		f32(p.Eps), f32(p.WeightDecay), f32(c1), f32(c2), f32(p.GradScale), dec)
}
