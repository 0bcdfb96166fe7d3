package quant

import (
	"math"
)

// Block sizes in bytes of the 32-value formats; see ggml-common.h.
const (
	blockQ4_0 = 2 + QK/2     // d f16, qs[16] nibbles
	blockQ4_1 = 4 + QK/2     // d f16, m f16, qs[16] nibbles
	blockQ5_0 = 2 + 4 + QK/2 // d f16, qh u32, qs[16] nibbles
	blockQ5_1 = 4 + 4 + QK/2 // d f16, m f16, qh u32, qs[16] nibbles
	blockQ8_0 = 2 + QK       // d f16, qs[32] int8
	blockQ8_1 = 4 + QK       // d f16, s f16, qs[32] int8
)

// absf is fabsf without the round trip through float64.
func absf(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// roundInt is C's (int)roundf(v), rounding half away from zero, for |v| <
// 2^23. Adding ±0.5 in float64 is exact there, so truncating the sum rounds
// correctly; math.Round would too, but is several times slower.
func roundInt(v float32) int32 {
	if v < 0 {
		return int32(float64(v) - 0.5)
	}
	return int32(float64(v) + 0.5)
}

func dequantizeQ8_0(dst []float32, src []byte) {
	nb := len(dst) / QK
	src = src[:nb*blockQ8_0]
	for b := range nb {
		blk := src[b*blockQ8_0 : (b+1)*blockQ8_0]
		y := dst[b*QK : (b+1)*QK]
		d := f16At(blk)
		qs := blk[2 : 2+QK]
		for j := range y {
			y[j] = float32(int8(qs[j])) * d
		}
	}
}

// dequantizeQ8_1 ignores the stored s = d*sum(qs): it only serves ggml's
// dot products against Q4_1 and Q5_1 weights.
func dequantizeQ8_1(dst []float32, src []byte) {
	nb := len(dst) / QK
	src = src[:nb*blockQ8_1]
	for b := range nb {
		blk := src[b*blockQ8_1 : (b+1)*blockQ8_1]
		y := dst[b*QK : (b+1)*QK]
		d := f16At(blk)
		qs := blk[4 : 4+QK]
		for j := range y {
			y[j] = float32(int8(qs[j])) * d
		}
	}
}

// amaxOf is ggml's MAX(amax, fabsf(v)) loop, kept as the C macro's
// comparison so that NaNs propagate the way they do in ggml.
func amaxOf(x []float32) float32 {
	var amax float32
	for _, v := range x {
		if a := absf(v); !(amax > a) {
			amax = a
		}
	}
	return amax
}

// quantizeQ8_0 is ggml's quantize_row_q8_0_ref: d = amax/127, q = round(x/d).
// The quants are computed with the float32 d, the block stores it as f16.
func quantizeQ8_0(dst []byte, src []float32) {
	nb := len(src) / QK
	dst = dst[:nb*blockQ8_0]
	for b := range nb {
		x := src[b*QK : (b+1)*QK]
		blk := dst[b*blockQ8_0 : (b+1)*blockQ8_0]
		d := amaxOf(x) / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(blk, d)
		qs := blk[2 : 2+QK]
		for j, v := range x {
			qs[j] = byte(int8(roundInt(v * id)))
		}
	}
}

// quantizeQ8_1 is ggml's quantize_row_q8_1_ref: Q8_0 plus s = d*sum(qs).
func quantizeQ8_1(dst []byte, src []float32) {
	nb := len(src) / QK
	dst = dst[:nb*blockQ8_1]
	for b := range nb {
		x := src[b*QK : (b+1)*QK]
		blk := dst[b*blockQ8_1 : (b+1)*blockQ8_1]
		d := amaxOf(x) / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(blk, d)
		qs := blk[4 : 4+QK]
		sum := 0
		for j, v := range x {
			q := int8(roundInt(v * id))
			qs[j] = byte(q)
			sum += int(q)
		}
		putF16(blk[2:], float32(sum)*d)
	}
}
