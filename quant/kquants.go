package quant

import (
	"encoding/binary"
	"math"
)

// Block sizes in bytes of the 256-value k-quant super-blocks; see
// ggml-common.h for the field order, which is not the same in every format.
const (
	blockQ2_K = QKK/16 + QKK/4 + 2 + 2     // scales[16], qs[64], d, dmin
	blockQ3_K = QKK/8 + QKK/4 + 12 + 2     // hmask[32], qs[64], scales[12], d
	blockQ4_K = 2 + 2 + 12 + QKK/2         // d, dmin, scales[12], qs[128]
	blockQ5_K = 2 + 2 + 12 + QKK/8 + QKK/2 // d, dmin, scales[12], qh[32], qs[128]
	blockQ6_K = QKK/2 + QKK/4 + QKK/16 + 2 // ql[128], qh[64], scales[16] int8, d
	blockQ8_K = 4 + QKK + QKK/16*2         // d f32, qs[256] int8, bsums[16] int16
)

// scaleMinK4 unpacks the 6-bit scale and min of sub-block j (0..7) from the
// 12 scale bytes of Q4_K and Q5_K (ggml's get_scale_min_k4). Bytes 0..3 hold
// scales 0..3 and bytes 4..7 mins 0..3 in their low six bits; scales and mins
// 4..7 keep their low nibbles in bytes 8..11 and their top two bits in the
// spare high bits of bytes 0..3 (scales) and 4..7 (mins).
func scaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// putScaleMinK4 is the inverse of scaleMinK4 for all eight sub-blocks.
func putScaleMinK4(q []byte, ls, lm *[8]uint8) {
	for j := range 8 {
		if j < 4 {
			q[j] = ls[j]
			q[j+4] = lm[j]
		} else {
			q[j+4] = ls[j]&0xf | (lm[j]&0xf)<<4
			q[j-4] |= (ls[j] >> 4) << 6
			q[j] |= (lm[j] >> 4) << 6
		}
	}
}

// scaleQ3K unpacks the 6-bit scale of sub-block j (0..15) of Q3_K, biased by
// 32: the low nibbles are in bytes 0..7 (low then high nibble), the top two
// bits in bytes 8..11, two bits per sub-block, j%4 picking the byte.
func scaleQ3K(j int, s []byte) int {
	var lo byte
	if j < 8 {
		lo = s[j] & 0xf
	} else {
		lo = s[j-8] >> 4
	}
	hi := (s[8+j%4] >> (2 * (j / 4))) & 3
	return int(lo|hi<<4) - 32
}

// dequantizeQ2_K: value = d*(sc&15)*q - dmin*(sc>>4), q two bits. Each 128
// values use 32 bytes of qs; shift 2k of byte l holds value 32k+l.
func dequantizeQ2_K(dst []float32, src []byte) {
	nb := len(dst) / QKK
	src = src[:nb*blockQ2_K]
	for b := range nb {
		blk := src[b*blockQ2_K : (b+1)*blockQ2_K]
		y := dst[b*QKK : (b+1)*QKK]
		scales := blk[:16]
		d, dmin := f16At(blk[80:]), f16At(blk[82:])
		is := 0
		for n := 0; n < QKK; n += 128 {
			q := blk[16+n/4 : 16+n/4+32]
			for shift := 0; shift < 8; shift += 2 {
				for half := range 2 {
					sc := scales[is]
					is++
					dl, ml := d*float32(sc&0xf), dmin*float32(sc>>4)
					out := y[n+shift*16+half*16 : n+shift*16+half*16+16]
					for l := range out {
						out[l] = float32(dl*float32((q[half*16+l]>>shift)&3)) - ml
					}
				}
			}
		}
	}
}

// dequantizeQ3_K: value = d*(sc-32)*(q-4), q three bits: two in qs laid out
// as in Q2_K, the third in hmask where bit k of byte l belongs to value 32k+l.
// A clear hmask bit means the value is q-4; a set bit means q.
func dequantizeQ3_K(dst []float32, src []byte) {
	nb := len(dst) / QKK
	src = src[:nb*blockQ3_K]
	for b := range nb {
		blk := src[b*blockQ3_K : (b+1)*blockQ3_K]
		y := dst[b*QKK : (b+1)*QKK]
		hm := blk[:32]
		scales := blk[96:108]
		d := f16At(blk[108:])
		is := 0
		m := byte(1)
		for n := 0; n < QKK; n += 128 {
			q := blk[32+n/4 : 32+n/4+32]
			for shift := 0; shift < 8; shift += 2 {
				for half := range 2 {
					dl := d * float32(scaleQ3K(is, scales))
					is++
					out := y[n+shift*16+half*16 : n+shift*16+half*16+16]
					for l := range out {
						v := int((q[half*16+l] >> shift) & 3)
						if hm[half*16+l]&m == 0 {
							v -= 4
						}
						out[l] = dl * float32(v)
					}
				}
				m <<= 1
			}
		}
	}
}

// dequantizeQ4_K: value = d*sc*q - dmin*m per 32-value sub-block. Each 64
// values share 32 bytes of qs: the low nibbles are the first 32 values, the
// high nibbles the next 32.
func dequantizeQ4_K(dst []float32, src []byte) {
	nb := len(dst) / QKK
	src = src[:nb*blockQ4_K]
	for b := range nb {
		blk := src[b*blockQ4_K : (b+1)*blockQ4_K]
		y := dst[b*QKK : (b+1)*QKK]
		d, dmin := f16At(blk), f16At(blk[2:])
		scales := blk[4:16]
		for j := range QKK / 64 {
			q := blk[16+32*j : 16+32*j+32]
			sc, m := scaleMinK4(2*j, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(2*j+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			lo := y[64*j : 64*j+32]
			hi := y[64*j+32 : 64*j+64]
			for l, v := range q {
				lo[l] = float32(d1*float32(v&0xf)) - m1
				hi[l] = float32(d2*float32(v>>4)) - m2
			}
		}
	}
}

// dequantizeQ5_K: Q4_K plus a fifth bit: bit 2j of qh[l] belongs to value
// 64j+l and bit 2j+1 to value 64j+32+l.
func dequantizeQ5_K(dst []float32, src []byte) {
	nb := len(dst) / QKK
	src = src[:nb*blockQ5_K]
	for b := range nb {
		blk := src[b*blockQ5_K : (b+1)*blockQ5_K]
		y := dst[b*QKK : (b+1)*QKK]
		d, dmin := f16At(blk), f16At(blk[2:])
		scales := blk[4:16]
		qh := blk[16:48]
		for j := range QKK / 64 {
			ql := blk[48+32*j : 48+32*j+32]
			sc, m := scaleMinK4(2*j, scales)
			d1, m1 := d*float32(sc), dmin*float32(m)
			sc, m = scaleMinK4(2*j+1, scales)
			d2, m2 := d*float32(sc), dmin*float32(m)
			lo := y[64*j : 64*j+32]
			hi := y[64*j+32 : 64*j+64]
			for l, v := range ql {
				h := qh[l] >> (2 * j)
				lo[l] = float32(d1*float32(v&0xf|(h&1)<<4)) - m1
				hi[l] = float32(d2*float32(v>>4|(h>>1&1)<<4)) - m2
			}
		}
	}
}

// q6K returns the four signed 6-bit quants that ql[l], ql[l+32] and qh[l]
// hold for values l, l+32, l+64 and l+96 of a 128-value half.
func q6K(ql, qh []byte, l int) (q1, q2, q3, q4 int) {
	a, c, h := ql[l], ql[l+32], qh[l]
	q1 = int(a&0xf|(h&3)<<4) - 32
	q2 = int(c&0xf|(h>>2&3)<<4) - 32
	q3 = int(a>>4|(h>>4&3)<<4) - 32
	q4 = int(c>>4|(h>>6&3)<<4) - 32
	return
}

// dequantizeQ6_K: value = d*sc*(q-32), q six bits, sc a signed byte per 16
// values. Each 128 values use 64 bytes of ql (low nibbles: values 0..63,
// high nibbles: 64..127) and 32 bytes of qh (two bits per value).
func dequantizeQ6_K(dst []float32, src []byte) {
	nb := len(dst) / QKK
	src = src[:nb*blockQ6_K]
	for b := range nb {
		blk := src[b*blockQ6_K : (b+1)*blockQ6_K]
		d := f16At(blk[208:])
		for n := 0; n < QKK; n += 128 {
			y := dst[b*QKK+n : b*QKK+n+128]
			ql := blk[n/2 : n/2+64]
			qh := blk[128+n/4 : 128+n/4+32]
			sc := blk[192+n/16 : 192+n/16+8]
			for l := range 32 {
				is := l / 16
				q1, q2, q3, q4 := q6K(ql, qh, l)
				y[l] = float32(d*float32(int8(sc[is]))) * float32(q1)
				y[l+32] = float32(d*float32(int8(sc[is+2]))) * float32(q2)
				y[l+64] = float32(d*float32(int8(sc[is+4]))) * float32(q3)
				y[l+96] = float32(d*float32(int8(sc[is+6]))) * float32(q4)
			}
		}
	}
}

// dequantizeQ8_K: value = d*q with a float32 d. The block sums are only for
// dot products.
func dequantizeQ8_K(dst []float32, src []byte) {
	nb := len(dst) / QKK
	src = src[:nb*blockQ8_K]
	for b := range nb {
		blk := src[b*blockQ8_K : (b+1)*blockQ8_K]
		y := dst[b*QKK : (b+1)*QKK]
		d := math.Float32frombits(binary.LittleEndian.Uint32(blk))
		qs := blk[4 : 4+QKK]
		for j := range y {
			y[j] = d * float32(int8(qs[j]))
		}
	}
}
