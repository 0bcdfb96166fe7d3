package device

import (
	"fmt"

	"dovetail/cpu/kernels"
	"dovetail/quant"
)

// ntRange computes rows [lo, hi) of b against every row of a:
// out[j*ldo + r] = Σ_c a[j*lda + c] · b[r*ldb + c] for j < n, c < k.
// float32 goes to the kernels' F32 matmul, which reads b once for all n
// rows of a; float64 (gradient checks) is a plain loop.
func (h *host[T]) ntRange(out []T, ldo int, a []T, lda int, b []T, ldb int, n, k, lo, hi int) {
	if n == 0 || hi <= lo || k == 0 {
		return
	}
	if o32, ok := any(out).([]float32); ok {
		a32, b32 := any(a).([]float32), any(b).([]float32)
		// The kernel checks lengths against its own view of the layout: trim
		// so that the last row ends where the data does.
		h.k.MatMul(quant.F32, o32, ldo, kernels.Bytes(b32[:(hi-1)*ldb+k]), 4*ldb, lo, hi,
			kernels.Bytes(a32[:(n-1)*lda+k]), 4*lda, n, k)
		return
	}
	for j := range n {
		aj := a[j*lda : j*lda+k]
		oj := out[j*ldo:]
		for r := lo; r < hi; r++ {
			br := b[r*ldb : r*ldb+k]
			var s T
			for c, v := range aj {
				s += v * br[c]
			}
			oj[r] = s
		}
	}
}

// nt is ntRange over all m rows of b, split across workers by rows of b.
func (h *host[T]) nt(out []T, ldo int, a []T, lda int, b []T, ldb int, n, k, m int) {
	h.par(m, n*k, func(_, lo, hi int) { h.ntRange(out, ldo, a, lda, b, ldb, n, k, lo, hi) })
}

// transpose: dst[c×r] = src[r×c]ᵀ.
func transpose[T float32 | float64](dst, src []T, r, c int) { transposeStrided(dst, src, c, r, c) }

func addTo[T float32 | float64](dst, src []T) {
	for i, v := range src {
		dst[i] += v
	}
}

func (h *host[T]) MatMul(out, x, w Buffer, n, in, o int) {
	os, xs, ws := h.s(out), h.s(x), h.s(w)
	need("MatMul", n*o, os)
	need("MatMul", n*in, xs)
	need("MatMul", o*in, ws)
	h.nt(os, o, xs, in, ws, in, n, in, o)
}

// MatMulBackward turns both products into the kernel's "a·bᵀ" form with
// transposed copies: dx = dout · (wᵀ)ᵀ and dw = doutᵀ · (xᵀ)ᵀ.
func (h *host[T]) MatMulBackward(dx, dw, dout, x, w Buffer, n, in, o int) {
	ds, xs, ws := h.s(dout), h.s(x), h.s(w)
	need("MatMulBackward", n*o, ds)
	if dx != nil {
		dxs := h.s(dx)
		need("MatMulBackward", n*in, dxs)
		need("MatMulBackward", o*in, ws)
		wt := h.scratch(in * o)
		transpose(wt, ws[:o*in], o, in)
		tmp := h.scratch(n * in)
		h.nt(tmp, in, ds, o, wt, o, n, o, in)
		addTo(dxs[:n*in], tmp)
		h.put(wt)
		h.put(tmp)
	}
	if dw != nil {
		dws := h.s(dw)
		need("MatMulBackward", o*in, dws)
		need("MatMulBackward", n*in, xs)
		dt, xt := h.scratch(o*n), h.scratch(in*n)
		transpose(dt, ds[:n*o], n, o)
		transpose(xt, xs[:n*in], n, in)
		tmp := h.scratch(o * in)
		h.nt(tmp, in, dt, n, xt, n, o, n, in)
		addTo(dws[:o*in], tmp)
		h.put(dt)
		h.put(xt)
		h.put(tmp)
	}
}

// frozenChunk is how many rows of a frozen matrix are dequantized at a
// time: small enough for a worker's cache, large enough to amortize the
// kernel call. The whole matrix is never held as floats.
const frozenChunk = 64

func (h *host[T]) MatMulFrozen(out, x Buffer, w Matrix, n int) {
	m := h.mat(w)
	os, xs := h.s(out), h.s(x)
	need("MatMulFrozen", n*m.rows, os)
	need("MatMulFrozen", n*m.cols, xs)
	// float32 values at hand (and a float32 device): one product, no copy.
	if w, ok := any(m.f32).([]T); ok && m.f32 != nil {
		h.nt(os, m.rows, xs, m.cols, w, m.cols, n, m.cols, m.rows)
		return
	}
	if o32, ok := any(os).([]float32); ok {
		h.frozenKernel(o32, any(xs).([]float32)[:n*m.cols], m, n)
		return
	}
	chunks := (m.rows + frozenChunk - 1) / frozenChunk
	h.par(chunks, n*m.cols*frozenChunk, func(_, clo, chi int) {
		buf := h.scratch(frozenChunk * m.cols)
		tmp := make([]float32, m.cols)
		for ch := clo; ch < chi; ch++ {
			lo, hi := ch*frozenChunk, min((ch+1)*frozenChunk, m.rows)
			h.dequant(buf, m, lo, hi, tmp)
			h.ntRange(os[lo:], m.rows, xs, m.cols, buf, m.cols, n, m.cols, 0, hi-lo)
		}
		h.put(buf)
	})
}

// frozenKernel multiplies a large frozen matrix in its own format with the
// CPU kernels, the target's own matrix products, its activations quantized as
// the target quantizes its own (Q8_0 blocks for Q8_0 and Q4_0 weights, and so
// on). Dequantizing the matrix a chunk at a time instead made every draft
// step a Go pass over the whole LM head (docs/measurements/gpu.md, "The
// draft's LM head on the host"). The products differ from the dequantized
// float32 ones by the activations' rounding, which a draft's proposals
// tolerate; the float64 device, for gradient checks, keeps the exact path.
func (h *host[T]) frozenKernel(out, x []float32, m *hostMat, n int) {
	act := h.k.Activations(m.t, make([]byte, kernels.ActivationBytes(m.t, len(x))), x)
	rb := kernels.ActivationBytes(m.t, m.cols)
	h.par(m.rows, n*m.cols, func(_, lo, hi int) {
		h.k.MatMul(m.t, out, m.rows, m.data, m.rowBytes, lo, hi, act, rb, n, m.cols)
	})
}

// MatMulFrozenBackward accumulates per worker, then sums: each worker owns
// a range of the matrix's rows, and every row contributes to all of dx.
func (h *host[T]) MatMulFrozenBackward(dx, dout Buffer, w Matrix, n int) {
	m := h.mat(w)
	dxs, ds := h.s(dx), h.s(dout)
	need("MatMulFrozenBackward", n*m.cols, dxs)
	need("MatMulFrozenBackward", n*m.rows, ds)
	// A small matrix is transposed once and kept: then dx is one product
	// whose inner dimension is the whole vocabulary.
	if m.f32 != nil {
		m.once.Do(func() {
			m.f32T = make([]float32, len(m.f32))
			transpose(m.f32T, m.f32, m.rows, m.cols)
		})
		if wt, ok := any(m.f32T).([]T); ok {
			tmp := h.scratch(n * m.cols)
			h.nt(tmp, m.cols, ds, m.rows, wt, m.rows, n, m.rows, m.cols)
			addTo(dxs[:n*m.cols], tmp)
			h.put(tmp)
			return
		}
	}
	chunks := (m.rows + frozenChunk - 1) / frozenChunk
	parts := make([][]T, h.workers)
	h.par(chunks, n*m.cols*frozenChunk, func(wk, clo, chi int) {
		buf, bt := h.scratch(frozenChunk*m.cols), h.scratch(frozenChunk*m.cols)
		tmp := make([]float32, m.cols)
		acc := make([]T, n*m.cols)
		out := h.scratch(n * m.cols)
		for ch := clo; ch < chi; ch++ {
			lo, hi := ch*frozenChunk, min((ch+1)*frozenChunk, m.rows)
			h.dequant(buf, m, lo, hi, tmp)
			transpose(bt, buf[:(hi-lo)*m.cols], hi-lo, m.cols)
			// out[j, c] = Σ_{r<hi-lo} dout[j, lo+r] · Wᵀ[c, r]
			h.ntRange(out, m.cols, ds[lo:], m.rows, bt, hi-lo, n, hi-lo, 0, m.cols)
			addTo(acc, out)
		}
		parts[wk] = acc
		h.put(buf)
		h.put(bt)
		h.put(out)
	})
	for _, p := range parts {
		if p != nil {
			addTo(dxs[:n*m.cols], p)
		}
	}
}

func (h *host[T]) Embed(out Buffer, table Matrix, tokens []int) {
	m := h.mat(table)
	os := h.s(out)
	need("Embed", len(tokens)*m.cols, os)
	tmp := make([]float32, m.cols)
	for i, tok := range tokens {
		if tok < 0 || tok >= m.rows {
			panic(fmt.Sprintf("device: Embed: token %d outside [0, %d)", tok, m.rows))
		}
		h.dequant(os[i*m.cols:], m, tok, tok+1, tmp)
	}
}
