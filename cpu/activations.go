package cpu

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
	h16  []uint16 // f16 or bf16
	q8   []byte   // Q8_0 or Q8_K
	have quant.Type
	ok   bool
}

func newActs(n int) *acts {
	q8 := max(n/quant.QK*quant.Q8_0.TypeSize(), n/quant.QKK*quant.Q8_K.TypeSize())
	return &acts{h16: make([]uint16, n), q8: make([]byte, q8)}
}

// set makes x the current vector.
func (a *acts) set(x []float32) {
	a.x, a.ok = x, false
}

// form returns the current vector as bytes in the form weights of type t
// multiply it in.
func (a *acts) form(t quant.Type) []byte {
	f := kernels.ActivationType(t)
	switch {
	case f == quant.F32:
		return kernels.Bytes(a.x)
	case a.ok && a.have == f:
	case f == quant.F16:
		goKernels.ToF16(a.h16[:len(a.x)], a.x)
	case f == quant.BF16:
		for i, v := range a.x {
			a.h16[i] = quant.F32ToBF16(v)
		}
	case f == quant.Q8_0:
		goKernels.QuantizeQ8_0(a.q8[:len(a.x)/quant.QK*quant.Q8_0.TypeSize()], a.x)
	case f == quant.Q8_K:
		goKernels.QuantizeQ8_K(a.q8[:len(a.x)/quant.QKK*quant.Q8_K.TypeSize()], a.x)
	}
	a.have, a.ok = f, true
	switch f {
	case quant.F16, quant.BF16:
		return kernels.Bytes(a.h16[:len(a.x)])
	case quant.Q8_0:
		return a.q8[:len(a.x)/quant.QK*quant.Q8_0.TypeSize()]
	}
	return a.q8[:len(a.x)/quant.QKK*quant.Q8_K.TypeSize()]
}

// matmul: out[Rows] = W[Rows×Cols] · x[Cols], W in its stored format and x
// the current vector of a, split over the pool by weight rows.
func matmul(p *Pool, out []float32, w *models.Tensor, a *acts) {
	act := a.form(w.Type)
	p.For(w.Rows, func(lo, hi int) {
		goKernels.MatMul(w.Type, out, w.Rows, w.Data, w.RowBytes, lo, hi, act, len(act), 1, w.Cols)
	})
}
