package quant

// Q4_0 stores value j of a block in the low nibble of qs[j] for j < 16 and in
// the high nibble of qs[j-16] for j >= 16: the first half of the block in the
// low nibbles, the second half in the high ones, not neighbours in one byte.

func dequantizeQ4_0(dst []float32, src []byte) {
	nb := len(dst) / QK
	src = src[:nb*blockQ4_0]
	for b := range nb {
		blk := src[b*blockQ4_0 : (b+1)*blockQ4_0]
		y := dst[b*QK : (b+1)*QK]
		d := f16At(blk)
		qs := blk[2 : 2+QK/2]
		for j, q := range qs {
			y[j] = float32(int(q&0xf)-8) * d
			y[j+QK/2] = float32(int(q>>4)-8) * d
		}
	}
}

// clampQuant truncates v, ggml's (int8_t)(x + 0.5f) rounding, to a quant in
// [0, hi]. ggml clamps only from above; the lower clamp only matters for NaN
// or infinite input, where C's conversion is undefined.
func clampQuant(v float32, hi int) byte {
	if !(v >= 0) {
		return 0
	}
	if v >= float32(hi) {
		return byte(hi)
	}
	return byte(int(v))
}

// quantizeQ4_0 is ggml's quantize_row_q4_0_ref. The scale is the signed
// value of largest magnitude over -8, so that value maps to quant 0 exactly
// and the asymmetric range [-8, 7] spends its extra level on that side.
func quantizeQ4_0(dst []byte, src []float32) {
	nb := len(src) / QK
	dst = dst[:nb*blockQ4_0]
	for b := range nb {
		x := src[b*QK : (b+1)*QK]
		blk := dst[b*blockQ4_0 : (b+1)*blockQ4_0]
		var amax, vmax float32
		for _, v := range x {
			if a := absf(v); amax < a {
				amax, vmax = a, v
			}
		}
		d := vmax / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(blk, d)
		qs := blk[2 : 2+QK/2]
		for j := range qs {
			// The float32() conversions forbid fusing into an FMA, which
			// would round differently from ggml.
			x0 := clampQuant(float32(x[j]*id)+8.5, 15)
			x1 := clampQuant(float32(x[j+QK/2]*id)+8.5, 15)
			qs[j] = x0 | x1<<4
		}
	}
}
