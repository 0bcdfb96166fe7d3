package quant

import "encoding/binary"

// Q5_0 and Q5_1 are Q4_0 and Q4_1 with a fifth bit per value: bit j of the
// little-endian uint32 qh is the high bit of value j (0..31), so the low
// nibbles and the high bits index the block the same way.

func dequantizeQ5_0(dst []float32, src []byte) {
	nb := len(dst) / QK
	src = src[:nb*blockQ5_0]
	for b := range nb {
		blk := src[b*blockQ5_0 : (b+1)*blockQ5_0]
		y := dst[b*QK : (b+1)*QK]
		d := f16At(blk)
		qh := binary.LittleEndian.Uint32(blk[2:6])
		qs := blk[6 : 6+QK/2]
		for j, q := range qs {
			h0 := byte(qh>>j) & 1 << 4
			h1 := byte(qh>>(j+QK/2)) & 1 << 4
			y[j] = float32(int(q&0xf|h0)-16) * d
			y[j+QK/2] = float32(int(q>>4|h1)-16) * d
		}
	}
}

func dequantizeQ5_1(dst []float32, src []byte) {
	nb := len(dst) / QK
	src = src[:nb*blockQ5_1]
	for b := range nb {
		blk := src[b*blockQ5_1 : (b+1)*blockQ5_1]
		y := dst[b*QK : (b+1)*QK]
		d, m := f16At(blk), f16At(blk[2:])
		qh := binary.LittleEndian.Uint32(blk[4:8])
		qs := blk[8 : 8+QK/2]
		for j, q := range qs {
			h0 := byte(qh>>j) & 1 << 4
			h1 := byte(qh>>(j+QK/2)) & 1 << 4
			y[j] = float32(float32(q&0xf|h0)*d) + m
			y[j+QK/2] = float32(float32(q>>4|h1)*d) + m
		}
	}
}

// packQ5 stores 32 five-bit quants in Q5's split layout.
func packQ5(qh, qs []byte, l *[QK]byte) {
	var h uint32
	for j := range QK / 2 {
		x0, x1 := l[j], l[j+QK/2]
		qs[j] = x0&0xf | (x1&0xf)<<4
		h |= uint32(x0>>4&1) << j
		h |= uint32(x1>>4&1) << (j + QK/2)
	}
	binary.LittleEndian.PutUint32(qh, h)
}

// quantizeQ5_0 is ggml's quantize_row_q5_0_ref: Q4_0's scheme over [-16, 15].
func quantizeQ5_0(dst []byte, src []float32) {
	nb := len(src) / QK
	dst = dst[:nb*blockQ5_0]
	var l [QK]byte
	for b := range nb {
		x := src[b*QK : (b+1)*QK]
		blk := dst[b*blockQ5_0 : (b+1)*blockQ5_0]
		var amax, vmax float32
		for _, v := range x {
			if a := absf(v); amax < a {
				amax, vmax = a, v
			}
		}
		d := vmax / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(blk, d)
		for j, v := range x {
			l[j] = clampQuant(float32(v*id)+16.5, 31)
		}
		packQ5(blk[2:6], blk[6:6+QK/2], &l)
	}
}

// quantizeQ5_1 is ggml's quantize_row_q5_1_ref: Q4_1's scheme over [0, 31].
func quantizeQ5_1(dst []byte, src []float32) {
	nb := len(src) / QK
	dst = dst[:nb*blockQ5_1]
	var l [QK]byte
	for b := range nb {
		x := src[b*QK : (b+1)*QK]
		blk := dst[b*blockQ5_1 : (b+1)*blockQ5_1]
		lo, hi := minMaxOf(x)
		d := (hi - lo) / 31
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(blk, d)
		putF16(blk[2:], lo)
		for j, v := range x {
			l[j] = clampQuant(float32((v-lo)*id)+0.5, 31)
		}
		packQ5(blk[4:8], blk[8:8+QK/2], &l)
	}
}
