package reference

import (
	"dovetail/cpu/kernels"
	"dovetail/models"
	"dovetail/quant"
)

// goKernels are the pure-Go kernels: the reference forward multiplies
// with them, one vector at a time.
var goKernels, _ = kernels.ByName("go")

// acts holds one activation vector in the form each weight type multiplies
// it in, as llama.cpp does (its vec_dot_type; see kernels.ActivationType):
// F16 weights meet x rounded to f16, BF16 weights x rounded to bf16, Q8_0
// and Q4_0 weights x quantized to Q8_0 (as ggml's SIMD quantizer rounds),
// k-quants x quantized to Q8_K; F32 and the rest meet x as it is. Matching
// this is what makes greedy output agree with llama.cpp's on near-ties.
//
// Each form is computed at most once per vector, before the parallel loop.
type acts struct {
	x    []float32
	buf  []byte // room for any form
	cur  []byte // the form computed last
	have quant.Type
	ok   bool
}

func newActs(n int) *acts {
	return &acts{buf: make([]byte, max(kernels.ActivationBytes(quant.F16, n), kernels.ActivationBytes(quant.Q8_0, n),
		kernels.ActivationBytes(quant.Q4_K, n)))}
}

// set makes x the current vector.
func (a *acts) set(x []float32) {
	a.x, a.ok = x, false
}

// form returns the current vector as bytes in the form weights of type t
// multiply it in.
func (a *acts) form(t quant.Type) []byte {
	f := kernels.ActivationType(t)
	if f == quant.F32 {
		return kernels.Bytes(a.x)
	}
	if !a.ok || a.have != f {
		a.cur, a.have, a.ok = goKernels.Activations(t, a.buf, a.x), f, true
	}
	return a.cur
}

// matmul: out[Rows] = W[Rows×Cols] · x[Cols], W in its stored format and x
// the current vector of a, split over the threads by weight rows.
func (r *Reference) matmul(out []float32, w *models.Tensor, a *acts) {
	act := a.form(w.Type)
	parallel(r.threads, w.Rows, func(lo, hi int) {
		goKernels.MatMul(w.Type, out, w.Rows, w.Data, w.RowBytes, lo, hi, act, len(act), 1, w.Cols)
	})
}
