package cpu

import (
	"encoding/binary"
	"math"

	"dovetail/models"
	"dovetail/quant"
)

// acts holds one activation vector in the form each weight type multiplies
// it in, as llama.cpp does (its vec_dot_type): F16 weights meet x rounded to
// f16, BF16 weights x rounded to bf16, Q8_0 and Q4_0 weights x quantized to
// Q8_0, k-quants x quantized to Q8_K; F32 and the rest meet x as it is.
// Matching this is what makes greedy output agree with llama.cpp's on
// near-ties, and it is the arithmetic the int8 SIMD kernels perform.
//
// Each form is computed at most once per vector, before the parallel loop.
type acts struct {
	x          []float32
	f16, bf16  []float32
	q8_0, q8_k []byte
	have       [quant.BF16 + 1]bool // by form
}

func newActs(n int) *acts {
	a := &acts{f16: make([]float32, n), bf16: make([]float32, n)}
	a.q8_0 = make([]byte, n/quant.QK*quant.Q8_0.TypeSize()+quant.Q8_0.TypeSize())
	a.q8_k = make([]byte, n/quant.QKK*quant.Q8_K.TypeSize()+quant.Q8_K.TypeSize())
	return a
}

// set makes x the current vector.
func (a *acts) set(x []float32) {
	a.x = x
	a.have = [quant.BF16 + 1]bool{}
}

// form returns the activation form for weights of type t, computing it if
// needed.
func (a *acts) form(t quant.Type) quant.Type {
	var f quant.Type
	switch t {
	case quant.F16:
		f = quant.F16
	case quant.BF16:
		f = quant.BF16
	case quant.Q8_0, quant.Q4_0:
		f = quant.Q8_0
	case quant.Q4_K, quant.Q6_K:
		f = quant.Q8_K
	default:
		return quant.F32
	}
	if a.have[f] {
		return f
	}
	n := len(a.x)
	switch f {
	case quant.F16:
		for i, v := range a.x {
			a.f16[i] = quant.F16ToF32(quant.F32ToF16(v))
		}
	case quant.BF16:
		for i, v := range a.x {
			a.bf16[i] = quant.BF16ToF32(quant.F32ToBF16(v))
		}
	case quant.Q8_0:
		quantizeQ8_0(a.q8_0, a.x)
	case quant.Q8_K:
		sz, _ := quant.Q8_K.RowSize(n)
		quant.QuantizeRow(quant.Q8_K, a.q8_k[:sz], a.x)
	}
	a.have[f] = true
	return f
}

// dot multiplies row r of w with the current vector in form f.
func (a *acts) dot(w *models.Tensor, r int, f quant.Type) float32 {
	row := w.Row(r)
	switch f {
	case quant.F16:
		return dotF16(row, a.f16[:w.Cols])
	case quant.BF16:
		return quant.DotRow(w.Type, row, a.bf16[:w.Cols])
	case quant.Q8_0:
		if w.Type == quant.Q4_0 {
			return quant.DotQ4_0Q8_0(row, a.q8_0, w.Cols)
		}
		return quant.DotQ8_0(row, a.q8_0, w.Cols)
	case quant.Q8_K:
		if w.Type == quant.Q4_K {
			return quant.DotQ4_KQ8_K(row, a.q8_k, w.Cols)
		}
		return quant.DotQ6_KQ8_K(row, a.q8_k, w.Cols)
	}
	if w.Type == quant.F32 {
		return dotF32(row, a.x)
	}
	return quant.DotRow(w.Type, row, a.x)
}

// dotF32 and dotF16 are quant.DotRow for F32 and F16 rows — the same
// float64 products summed in the same order, so bit-identical — without
// the intermediate dequantized buffer.
func dotF32(w []byte, x []float32) float32 {
	var acc float64
	for i, v := range x {
		acc += float64(math.Float32frombits(binary.LittleEndian.Uint32(w[4*i:]))) * float64(v)
	}
	return float32(acc)
}

func dotF16(w []byte, x []float32) float32 {
	var acc float64
	for i, v := range x {
		acc += float64(quant.F16ToF32(binary.LittleEndian.Uint16(w[2*i:]))) * float64(v)
	}
	return float32(acc)
}

// quantizeQ8_0 quantizes activations as ggml's SIMD quantize_row_q8_0 does,
// which differs from the reference quantizer in two roundings: the inverse
// scale is 127/amax rather than 1/(amax/127), and halves round to even. The
// differences flip int8 values near .5, enough to change a greedy token.
func quantizeQ8_0(dst []byte, x []float32) {
	const bs = 2 + quant.QK
	for b := 0; b < len(x)/quant.QK; b++ {
		blk := x[b*quant.QK : (b+1)*quant.QK]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		binary.LittleEndian.PutUint16(dst[b*bs:], quant.F32ToF16(d))
		var id float32
		if amax != 0 {
			id = 127 / amax
		}
		for i, v := range blk {
			dst[b*bs+2+i] = byte(int8(math.RoundToEven(float64(v * id))))
		}
	}
}
