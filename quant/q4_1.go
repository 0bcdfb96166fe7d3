package quant

import "math"

// minMaxOf is the min/max scan of ggml's Q4_1 and Q5_1 quantizers, which
// start from ±FLT_MAX.
func minMaxOf(x []float32) (lo, hi float32) {
	lo, hi = math.MaxFloat32, -math.MaxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

// Q4_1 is Q4_0's nibble layout with an offset: value = q*d + m, q in [0, 15].

func dequantizeQ4_1(dst []float32, src []byte) {
	nb := len(dst) / QK
	src = src[:nb*blockQ4_1]
	for b := range nb {
		blk := src[b*blockQ4_1 : (b+1)*blockQ4_1]
		y := dst[b*QK : (b+1)*QK]
		d, m := f16At(blk), f16At(blk[2:])
		qs := blk[4 : 4+QK/2]
		for j, q := range qs {
			y[j] = float32(float32(q&0xf)*d) + m
			y[j+QK/2] = float32(float32(q>>4)*d) + m
		}
	}
}

// quantizeQ4_1 is ggml's quantize_row_q4_1_ref.
func quantizeQ4_1(dst []byte, src []float32) {
	nb := len(src) / QK
	dst = dst[:nb*blockQ4_1]
	for b := range nb {
		x := src[b*QK : (b+1)*QK]
		blk := dst[b*blockQ4_1 : (b+1)*blockQ4_1]
		lo, hi := minMaxOf(x)
		d := (hi - lo) / 15
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(blk, d)
		putF16(blk[2:], lo)
		qs := blk[4 : 4+QK/2]
		for j := range qs {
			x0 := clampQuant(float32((x[j]-lo)*id)+0.5, 15)
			x1 := clampQuant(float32((x[j+QK/2]-lo)*id)+0.5, 15)
			qs[j] = x0 | x1<<4
		}
	}
}
