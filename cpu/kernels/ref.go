package kernels

import (
	"encoding/binary"
	"math"
	"unsafe"

	"dovetail/quant"
)

// goSet is the pure-Go level: the reference for the tests and the fallback.
// Its products are the quant package's, which mirror ggml's generic C kernels
// operation for operation, so this level agrees with llama.cpp's reference
// arithmetic exactly; the faster levels agree with it up to the order of
// float32 additions.
var goSet = newSet("go", impl{
	quantizeQ8_0: refQuantizeQ8_0,
	quantizeQ8_K: func(dst []byte, x []float32) {
		if err := quant.QuantizeRow(quant.Q8_K, dst, x); err != nil {
			panic("kernels: " + err.Error()) // unreachable: checked by newSet
		}
	},
	toF16: func(dst []uint16, x []float32) {
		for i, v := range x {
			dst[i] = quant.F32ToF16(v)
		}
	},
	matmul:     refMatMul,
	rmsnorm:    refRMSNorm,
	siluMul:    refSiLUMul,
	rope:       refRoPE,
	attention:  refAttention,
	streamRead: refStreamRead,
})

// refStreamRead is StreamRead in Go: the wrapping sum of b's 64-bit words,
// eight independent sums a line.
func refStreamRead(b []byte) uint64 {
	var s [8]uint64
	for i := 0; i+64 <= len(b); i += 64 {
		for k := range s {
			s[k] += binary.LittleEndian.Uint64(b[i+8*k:])
		}
	}
	return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7]
}

// refQuantizeQ8_0 quantizes as ggml's SIMD quantize_row_q8_0, which differs
// from the reference quantizer in two roundings: the inverse scale is
// 127/amax rather than 1/(amax/127), and halves round to even. The
// differences flip int8 values near .5, enough to change a greedy token, so
// every level must reproduce these bytes exactly.
func refQuantizeQ8_0(dst []byte, x []float32) {
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

// refMatMul loops weight rows outside activation rows, so each weight row is
// read from memory once and from cache n times.
func refMatMul(t quant.Type, out []float32, ldo int, w []byte, rowBytes, lo, hi int, act []byte, actRowBytes, n, cols int) {
	wsz, _ := t.RowSize(cols)
	asz, _ := ActivationType(t).RowSize(cols)
	dot := refDot(t)
	for r := lo; r < hi; r++ {
		row := w[r*rowBytes : r*rowBytes+wsz]
		for j := range n {
			out[j*ldo+r] = dot(row, act[j*actRowBytes:j*actRowBytes+asz], cols)
		}
	}
}

// refDot is the Go reference for t's dot products: the kernel table's, or
// for a type without C kernels quant's over float32 activations.
func refDot(t quant.Type) func(w, act []byte, cols int) float32 {
	if k := kernelOf(t); k != nil {
		return k.ref
	}
	return func(w, act []byte, _ int) float32 { return quant.DotRow(t, w, f32s(act)) }
}

// dotF16 is DotRow for F16 weights with f16 activations: the products of
// the widened values are exact in float64, summed in order, rounded once.
func dotF16(w, x []byte, _ int) float32 {
	var acc float64
	for i := 0; i+1 < len(w); i += 2 {
		a := quant.F16ToF32(uint16(w[i]) | uint16(w[i+1])<<8)
		b := quant.F16ToF32(uint16(x[i]) | uint16(x[i+1])<<8)
		acc += float64(a) * float64(b)
	}
	return float32(acc)
}

func dotBF16(w, x []byte, _ int) float32 {
	var acc float64
	for i := 0; i+1 < len(w); i += 2 {
		a := quant.BF16ToF32(uint16(w[i]) | uint16(w[i+1])<<8)
		b := quant.BF16ToF32(uint16(x[i]) | uint16(x[i+1])<<8)
		acc += float64(a) * float64(b)
	}
	return float32(acc)
}

// dotF32 is DotRow for F32 weights with float32 activations.
func dotF32(w, x []byte, _ int) float32 { return quant.DotRow(quant.F32, w, f32s(x)) }

// f32s views little-endian float32 bytes as floats; every platform Dovetail
// runs on is little-endian and allows unaligned loads.
func f32s(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

func refRMSNorm(out, x, weight []float32, n, cols int, eps float32) {
	for j := range n {
		xr, or := x[j*cols:(j+1)*cols], out[j*cols:(j+1)*cols]
		var ss float64
		for _, v := range xr {
			ss += float64(v) * float64(v)
		}
		scale := float32(1 / math.Sqrt(ss/float64(cols)+float64(eps)))
		for i, v := range xr {
			or[i] = v * scale * weight[i]
		}
	}
}

func refSiLUMul(out, gate, up []float32) {
	for i, g := range gate {
		out[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
	}
}

// refRoPE is cpu's rope. The conversions round each product, so that no
// compiler fuses them into a multiply-add the C levels do not do.
func refRoPE(x []float32, heads, hd, pairs int, neox bool, cos, sin []float32) {
	for h := 0; h < heads; h++ {
		v := x[h*hd : (h+1)*hd]
		for j := 0; j < pairs; j++ {
			a, b := 2*j, 2*j+1
			if neox {
				a, b = j, j+pairs
			}
			x0, x1 := v[a], v[b]
			v[a] = float32(x0*cos[j]) - float32(x1*sin[j])
			v[b] = float32(x0*sin[j]) + float32(x1*cos[j])
		}
	}
}

// refAttention is the reference forward pass's attention (cpu/reference.go)
// generalized to n new rows with a tree mask.
func refAttention(out, q []float32, kc, vc []uint16, past, n int, mask []uint8, heads, kvHeads, hd int, scale float32, jlo, jhi int, scratch []float32) {
	group := heads / kvHeads
	kvDim := kvHeads * hd
	var qbuf [MaxHeadDim]float32
	qr := qbuf[:hd]
	att := scratch[:past+n]
	negInf := float32(math.Inf(-1))
	for j := jlo; j < jhi; j++ {
		for h := range heads {
			qh := q[j*heads*hd+h*hd : j*heads*hd+(h+1)*hd]
			for i, v := range qh {
				qr[i] = quant.F16ToF32(quant.F32ToF16(v))
			}
			kvh := (h / group) * hd
			mx := negInf
			for t := range att {
				if t >= past && mask[j*n+t-past] == 0 {
					att[t] = negInf
					continue
				}
				k := kc[t*kvDim+kvh : t*kvDim+kvh+hd]
				var s float32
				for i, v := range qr {
					s += v * quant.F16ToF32(k[i])
				}
				att[t] = s * scale
				mx = max(mx, att[t])
			}
			var sum float64
			for t, v := range att {
				if v == negInf {
					att[t] = 0
					continue
				}
				e := math.Exp(float64(v - mx))
				att[t] = float32(e)
				sum += e
			}
			inv := float32(1 / sum)
			o := out[j*heads*hd+h*hd : j*heads*hd+(h+1)*hd]
			clear(o)
			for t, a := range att {
				if a == 0 {
					continue
				}
				wt := quant.F16ToF32(quant.F32ToF16(a * inv))
				v := vc[t*kvDim+kvh : t*kvDim+kvh+hd]
				for i := range o {
					o[i] += wt * quant.F16ToF32(v[i])
				}
			}
		}
	}
}
