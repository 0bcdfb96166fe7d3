package quant

import "encoding/binary"

// The 1-bit i-quants (IQ1_S and IQ1_M files; the 1.58-bit mixes of large
// models) store per 8 values an 11-bit index into iq1sGrid, whose entries
// are 8 values of -1, 0 or 1, shifted by a delta of ±1/8, and 3-bit scales:
//
//	IQ1_S (50 bytes): d (f16), qs[32] the indices' low 8 bits, then per
//	      32 values a u16: three 3-bit index tops, a 3-bit scale s and
//	      the delta's sign (bit 15): d·(2s+1)·(g ± 1/8);
//	IQ1_M (56 bytes): qs[32], qh[16] (per 8 values a nibble: the index's
//	      top 3 bits and the delta's sign), scales[8] (four u16: per 16
//	      values a 3-bit scale, and in their top nibbles the f16 d).
//
// Dequantization is ggml's dequantize_row_iq1_*; the Dot*Q8_K functions,
// the C kernels' references, sum each value as the integer 8g ± 1 (exact),
// times 1/8 at the end.

const (
	blockIQ1_S = 2 + QKK/8 + QKK/16 // d, qs[32], qh[8] u16
	blockIQ1_M = QKK/8 + QKK/16 + QKK/32
	iq1Delta   = 0.125
)

// iq1Values is grid entry g with delta sign neg as the integers 8g ± 1.
func iq1Values(g uint64, neg bool) [8]int32 {
	var v [8]int32
	for j := range v {
		x := 8 * int32(int8(g>>(8*j)))
		if neg {
			v[j] = x - 1
		} else {
			v[j] = x + 1
		}
	}
	return v
}

// iq1SEntry is the grid entry of IQ1_S's 8 values l (0..3) of group ib,
// and whether its delta is -1/8.
func iq1SEntry(blk []byte, ib, l int) (uint64, bool) {
	h := binary.LittleEndian.Uint16(blk[2+QKK/8+2*ib:])
	return iq1sGrid[int(blk[2+4*ib+l])|int(h>>(3*l)&7)<<8], h&0x8000 != 0
}

// iq1MEntry is the same for IQ1_M.
func iq1MEntry(blk []byte, ib, l int) (uint64, bool) {
	h := blk[QKK/8+2*ib+l/2] >> (4 * (l % 2))
	return iq1sGrid[int(blk[4*ib+l])|int(h&7)<<8], h&8 != 0
}

// iq1MScales is an IQ1_M super-block's four scale words and its d.
func iq1MScales(blk []byte) ([4]uint16, float32) {
	var sc [4]uint16
	for i := range sc {
		sc[i] = binary.LittleEndian.Uint16(blk[QKK/8+QKK/16+2*i:])
	}
	u := sc[0]>>12 | sc[1]>>8&0x00f0 | sc[2]>>4&0x0f00 | sc[3]&0xf000
	return sc, F16ToF32(u)
}

// iq1MScale is IQ1_M's 2s+1 of the 16 values half h (0, 1) of group ib.
func iq1MScale(sc [4]uint16, ib, h int) int32 {
	return int32(2*(sc[ib/2]>>(6*(ib%2)+3*h)&7) + 1)
}

func dequantizeIQ1_S(dst []float32, src []byte) {
	for b := range len(dst) / QKK {
		blk := src[b*blockIQ1_S : (b+1)*blockIQ1_S]
		y := dst[b*QKK : (b+1)*QKK]
		d := f16At(blk)
		for ib := range QKK / 32 {
			h := binary.LittleEndian.Uint16(blk[2+QKK/8+2*ib:])
			dl := d * float32(2*(h>>12&7)+1)
			for l := range 4 {
				g, neg := iq1SEntry(blk, ib, l)
				writeIQ1(y[32*ib+8*l:], g, neg, dl)
			}
		}
	}
}

func dequantizeIQ1_M(dst []float32, src []byte) {
	for b := range len(dst) / QKK {
		blk := src[b*blockIQ1_M : (b+1)*blockIQ1_M]
		y := dst[b*QKK : (b+1)*QKK]
		sc, d := iq1MScales(blk)
		for ib := range QKK / 32 {
			for l := range 4 {
				g, neg := iq1MEntry(blk, ib, l)
				writeIQ1(y[32*ib+8*l:], g, neg, d*float32(iq1MScale(sc, ib, l/2)))
			}
		}
	}
}

// writeIQ1 writes dl·(g + delta) for the 8 values of grid entry g, as
// ggml's dequantization rounds them.
func writeIQ1(y []float32, g uint64, neg bool, dl float32) {
	delta := float32(iq1Delta)
	if neg {
		delta = -delta
	}
	for j := range 8 {
		y[j] = dl * (float32(int8(g>>(8*j))) + delta)
	}
}

// DotIQ1_SQ8_K is IQ1_S weights times Q8_K activations: per super-block the
// exact sum over 32-value groups of (2s+1) times the values 8g ± 1 times
// the activations, then (dw·dx)·sum summed in float32, times 1/8 (ggml's
// ggml_vec_dot_iq1_s_q8_K sums the same, the delta's part apart).
// Preconditions: n >= 0 is a multiple of 256, w holds at least n/256*50
// bytes and xq n/256*292; otherwise it returns NaN.
func DotIQ1_SQ8_K(w, xq []byte, n int) float32 { return dotIQ1(w, xq, n, blockIQ1_S, iq1SSum) }

// DotIQ1_MQ8_K is DotIQ1_SQ8_K for IQ1_M, with a scale per 16 values.
// Preconditions as DotIQ1_SQ8_K's, with 56 bytes a super-block.
func DotIQ1_MQ8_K(w, xq []byte, n int) float32 { return dotIQ1(w, xq, n, blockIQ1_M, iq1MSum) }

// dotIQ1 is the dot of IQ1 super-blocks of size bytes whose exact integer
// sums against 256 activation quants, and scale dw, sum gives.
func dotIQ1(w, xq []byte, n, size int, sum func(blk, q8 []byte) (bsum int32, dw float32)) float32 {
	nb, ok := iqDotOK(w, xq, n, size)
	if !ok {
		return nan
	}
	var sumf float32
	for b := range nb {
		xb := xq[b*blockQ8_K:]
		bsum, dw := sum(w[b*size:], xb[4:4+QKK])
		d := dw * q8KScale(xb)
		sumf += float32(d * float32(bsum)) // float32(): no fused multiply-add
	}
	return 0.125 * sumf
}

// iq1SSum is an IQ1_S super-block's sum and scale.
func iq1SSum(blk, q8 []byte) (int32, float32) {
	var bsum int32
	for ib := range QKK / 32 {
		var sumi int32
		for l := range 4 {
			g, neg := iq1SEntry(blk, ib, l)
			sumi += iq1Dot(g, neg, q8[32*ib+8*l:])
		}
		h := binary.LittleEndian.Uint16(blk[2+QKK/8+2*ib:])
		bsum += sumi * int32(2*(h>>12&7)+1)
	}
	return bsum, f16At(blk)
}

// iq1MSum is an IQ1_M super-block's.
func iq1MSum(blk, q8 []byte) (int32, float32) {
	sc, dw := iq1MScales(blk)
	var bsum int32
	for ib := range QKK / 32 {
		for h := range 2 {
			var sumi int32
			for l := 2 * h; l < 2*h+2; l++ {
				g, neg := iq1MEntry(blk, ib, l)
				sumi += iq1Dot(g, neg, q8[32*ib+8*l:])
			}
			bsum += sumi * iq1MScale(sc, ib, h)
		}
	}
	return bsum, dw
}

// iq1Dot is Σ (8g ± 1)·q8 over one grid entry's 8 values.
func iq1Dot(g uint64, neg bool, q8 []byte) int32 {
	var s int32
	for j, v := range iq1Values(g, neg) {
		s += v * int32(int8(q8[j]))
	}
	return s
}
