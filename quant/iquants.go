package quant

import "encoding/binary"

// The 2- and 3-bit i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S) store
// indices into grids of 8 (IQ2) or 4 (IQ3) magnitudes (iqgrids.go), signs
// as 7-bit indices into ksignsIQ2XS or as plain bits, and a scale per 32
// values. This package dequantizes them as ggml's dequantize_row_* do, and
// its Dot*Q8_K functions are the references of the C kernels, which take
// Q8_K activations as ggml's do.

const (
	blockIQ2_XXS = 2 + QKK/4                   // d, qs[32] u16
	blockIQ2_XS  = 2 + QKK/4 + QKK/32          // d, qs[32] u16, scales[8]
	blockIQ2_S   = 2 + QKK/4 + QKK/32 + QKK/32 // d, qs[64] (indices, then signs), qh[8], scales[8]
	blockIQ3_XXS = 2 + 3*QKK/8                 // d, qs[64] indices, then 32 bytes of scales and signs
	blockIQ3_S   = 2 + QKK/4 + QKK/32 + QKK/8 + QKK/64
)

// gridByte is byte j of a grid entry.
func gridByte(g uint64, j int) float32 { return float32(uint8(g >> (8 * j))) }

// signed is v negated where bit j of signs is set.
func signed(v float32, signs uint8, j int) float32 {
	if signs&kmaskIQ2XS[j] != 0 {
		return -v
	}
	return v
}

func dequantizeIQ2_XXS(dst []float32, src []byte) {
	for b := range len(dst) / QKK {
		blk := src[b*blockIQ2_XXS : (b+1)*blockIQ2_XXS]
		y := dst[b*QKK : (b+1)*QKK]
		d := f16At(blk)
		for ib := range QKK / 32 {
			q := blk[2+8*ib : 2+8*ib+8]
			aux1 := binary.LittleEndian.Uint32(q[4:])
			db := float32(d*(0.5+float32(aux1>>28))) * 0.25
			for l := range 4 {
				g := iq2xxsGrid[q[l]]
				signs := ksignsIQ2XS[aux1>>(7*l)&127]
				for j := range 8 {
					y[32*ib+8*l+j] = signed(db*gridByte(g, j), signs, j)
				}
			}
		}
	}
}

func dequantizeIQ2_XS(dst []float32, src []byte) {
	for b := range len(dst) / QKK {
		blk := src[b*blockIQ2_XS : (b+1)*blockIQ2_XS]
		y := dst[b*QKK : (b+1)*QKK]
		d := f16At(blk)
		for ib := range QKK / 32 {
			sc := blk[2+QKK/4+ib]
			db := [2]float32{float32(d*(0.5+float32(sc&0xf))) * 0.25, float32(d*(0.5+float32(sc>>4))) * 0.25}
			for l := range 4 {
				q := binary.LittleEndian.Uint16(blk[2+2*(4*ib+l):])
				g, signs := iq2xsGrid[q&511], ksignsIQ2XS[q>>9]
				for j := range 8 {
					y[32*ib+8*l+j] = signed(db[l/2]*gridByte(g, j), signs, j)
				}
			}
		}
	}
}

func dequantizeIQ2_S(dst []float32, src []byte) {
	for b := range len(dst) / QKK {
		blk := src[b*blockIQ2_S : (b+1)*blockIQ2_S]
		y := dst[b*QKK : (b+1)*QKK]
		d := f16At(blk)
		qs, signs := blk[2:2+QKK/8], blk[2+QKK/8:2+QKK/4]
		qh, scales := blk[2+QKK/4:2+QKK/4+QKK/32], blk[2+QKK/4+QKK/32:]
		for ib := range QKK / 32 {
			db := [2]float32{float32(d*(0.5+float32(scales[ib]&0xf))) * 0.25, float32(d*(0.5+float32(scales[ib]>>4))) * 0.25}
			for l := range 4 {
				g := iq2sGrid[int(qs[4*ib+l])|int(qh[ib])<<(8-2*l)&0x300]
				for j := range 8 {
					y[32*ib+8*l+j] = signed(db[l/2]*gridByte(g, j), signs[4*ib+l], j)
				}
			}
		}
	}
}

func dequantizeIQ3_XXS(dst []float32, src []byte) {
	for b := range len(dst) / QKK {
		blk := src[b*blockIQ3_XXS : (b+1)*blockIQ3_XXS]
		y := dst[b*QKK : (b+1)*QKK]
		d := f16At(blk)
		qs, ss := blk[2:2+QKK/4], blk[2+QKK/4:]
		for ib := range QKK / 32 {
			aux := binary.LittleEndian.Uint32(ss[4*ib:])
			db := float32(d*(0.5+float32(aux>>28))) * 0.5
			for l := range 4 {
				signs := ksignsIQ2XS[aux>>(7*l)&127]
				g1, g2 := uint64(iq3xxsGrid[qs[8*ib+2*l]]), uint64(iq3xxsGrid[qs[8*ib+2*l+1]])
				for j := range 4 {
					y[32*ib+8*l+j] = signed(db*gridByte(g1, j), signs, j)
					y[32*ib+8*l+j+4] = signed(db*gridByte(g2, j), signs, j+4)
				}
			}
		}
	}
}

func dequantizeIQ3_S(dst []float32, src []byte) {
	for b := range len(dst) / QKK {
		blk := src[b*blockIQ3_S : (b+1)*blockIQ3_S]
		y := dst[b*QKK : (b+1)*QKK]
		d := f16At(blk)
		qs, qh := blk[2:2+QKK/4], blk[2+QKK/4:2+QKK/4+QKK/32]
		signs, scales := blk[2+QKK/4+QKK/32:2+QKK/4+QKK/32+QKK/8], blk[2+QKK/4+QKK/32+QKK/8:]
		for ib := range QKK / 32 {
			sc := scales[ib/2] >> (4 * (ib % 2)) & 0xf
			db := d * float32(1+2*int(sc))
			for l := range 4 {
				i1 := int(qs[8*ib+2*l]) | int(qh[ib])<<(8-2*l)&256
				i2 := int(qs[8*ib+2*l+1]) | int(qh[ib])<<(7-2*l)&256
				g1, g2 := uint64(iq3sGrid[i1]), uint64(iq3sGrid[i2])
				s := signs[4*ib+l]
				for j := range 4 {
					y[32*ib+8*l+j] = signed(db*gridByte(g1, j), s, j)
					y[32*ib+8*l+j+4] = signed(db*gridByte(g2, j), s, j+4)
				}
			}
		}
	}
}

// DotIQ3_SQ8_K is ggml_vec_dot_iq3_s_q8_K (generic): per super-block the
// exact sum over 32-value groups of (2*scale+1) times the signed grid
// values times the activations, then (dw*dx)*sum summed in float32.
// Preconditions: n >= 0 is a multiple of 256, w holds at least n/256*110
// bytes and xq n/256*292; otherwise it returns NaN.
func DotIQ3_SQ8_K(w, xq []byte, n int) float32 {
	if n < 0 || n%QKK != 0 {
		return nan
	}
	nb := n / QKK
	if len(w) < nb*blockIQ3_S || len(xq) < nb*blockQ8_K {
		return nan
	}
	var sumf float32
	for b := range nb {
		blk := w[b*blockIQ3_S : (b+1)*blockIQ3_S]
		xb := xq[b*blockQ8_K : (b+1)*blockQ8_K]
		qs, qh := blk[2:2+QKK/4], blk[2+QKK/4:2+QKK/4+QKK/32]
		signs, scales := blk[2+QKK/4+QKK/32:2+QKK/4+QKK/32+QKK/8], blk[2+QKK/4+QKK/32+QKK/8:]
		q8 := xb[4 : 4+QKK]
		var bsum int32
		for ib := range QKK / 32 {
			var sumi int32
			for l := range 4 {
				i1 := int(qs[8*ib+2*l]) | int(qh[ib])<<(8-2*l)&256
				i2 := int(qs[8*ib+2*l+1]) | int(qh[ib])<<(7-2*l)&256
				g1, g2 := iq3sGrid[i1], iq3sGrid[i2]
				s := signs[4*ib+l]
				for j := range 4 {
					v1, v2 := int32(uint8(g1>>(8*j))), int32(uint8(g2>>(8*j)))
					if s&kmaskIQ2XS[j] != 0 {
						v1 = -v1
					}
					if s&kmaskIQ2XS[j+4] != 0 {
						v2 = -v2
					}
					sumi += v1*int32(int8(q8[32*ib+8*l+j])) + v2*int32(int8(q8[32*ib+8*l+j+4]))
				}
			}
			bsum += sumi * int32(2*(scales[ib/2]>>(4*(ib%2))&0xf)+1)
		}
		d := f16At(blk) * q8KScale(xb)
		sumf += float32(d * float32(bsum))
	}
	return sumf
}

// signedDot is Σ_j ±g_j·q8[j] over the k magnitudes of a grid entry (a
// byte each), negated where bit j of signs is set: ggml's inner loop.
func signedDot(g uint64, signs uint8, q8 []byte, k int) int32 {
	var s int32
	for j := range k {
		v := int32(uint8(g>>(8*j))) * int32(int8(q8[j]))
		if signs&kmaskIQ2XS[j] != 0 {
			v = -v
		}
		s += v
	}
	return s
}

// iqDotOK checks the Dot*Q8_K preconditions for weights of blk bytes a
// super-block and returns the super-block count.
func iqDotOK(w, xq []byte, n, blk int) (int, bool) {
	if n < 0 || n%QKK != 0 {
		return 0, false
	}
	nb := n / QKK
	return nb, len(w) >= nb*blk && len(xq) >= nb*blockQ8_K
}

// DotIQ2_XXSQ8_K is ggml_vec_dot_iq2_xxs_q8_K (generic): per super-block
// the exact sum over 32-value groups of (2·scale+1) times the signed grid
// values times the activations, then (dw·dx)·sum summed in float32, times
// 1/8. Preconditions: n >= 0 is a multiple of 256, w holds at least
// n/256*66 bytes and xq n/256*292; otherwise it returns NaN.
func DotIQ2_XXSQ8_K(w, xq []byte, n int) float32 {
	nb, ok := iqDotOK(w, xq, n, blockIQ2_XXS)
	if !ok {
		return nan
	}
	var sumf float32
	for b := range nb {
		blk, xb := w[b*blockIQ2_XXS:], xq[b*blockQ8_K:]
		q8 := xb[4 : 4+QKK]
		var bsum int32
		for ib := range QKK / 32 {
			q := blk[2+8*ib : 2+8*ib+8]
			aux1 := binary.LittleEndian.Uint32(q[4:])
			var sumi int32
			for l := range 4 {
				sumi += signedDot(iq2xxsGrid[q[l]], ksignsIQ2XS[aux1>>(7*l)&127], q8[32*ib+8*l:], 8)
			}
			bsum += sumi * int32(2*(aux1>>28)+1)
		}
		d := f16At(blk) * q8KScale(xb)
		sumf += float32(d * float32(bsum)) // float32(): no fused multiply-add
	}
	return 0.125 * sumf
}

// DotIQ2_XSQ8_K is ggml_vec_dot_iq2_xs_q8_K (generic), as DotIQ2_XXSQ8_K
// with a scale per 16 values. Preconditions as DotIQ2_XXSQ8_K's, with 74
// bytes a super-block.
func DotIQ2_XSQ8_K(w, xq []byte, n int) float32 {
	nb, ok := iqDotOK(w, xq, n, blockIQ2_XS)
	if !ok {
		return nan
	}
	var sumf float32
	for b := range nb {
		blk, xb := w[b*blockIQ2_XS:], xq[b*blockQ8_K:]
		q8 := xb[4 : 4+QKK]
		var bsum int32
		for ib := range QKK / 32 {
			sc := blk[2+QKK/4+ib]
			for h := range 2 {
				var sumi int32
				for l := 2 * h; l < 2*h+2; l++ {
					q := binary.LittleEndian.Uint16(blk[2+2*(4*ib+l):])
					sumi += signedDot(iq2xsGrid[q&511], ksignsIQ2XS[q>>9], q8[32*ib+8*l:], 8)
				}
				bsum += sumi * int32(2*(sc>>(4*h)&0xf)+1)
			}
		}
		d := f16At(blk) * q8KScale(xb)
		sumf += float32(d * float32(bsum)) // float32(): no fused multiply-add
	}
	return 0.125 * sumf
}

// DotIQ2_SQ8_K is ggml_vec_dot_iq2_s_q8_K (generic): 10-bit grid indices,
// plain sign bytes, a scale per 16 values. Preconditions as
// DotIQ2_XXSQ8_K's, with 82 bytes a super-block.
func DotIQ2_SQ8_K(w, xq []byte, n int) float32 {
	nb, ok := iqDotOK(w, xq, n, blockIQ2_S)
	if !ok {
		return nan
	}
	var sumf float32
	for b := range nb {
		blk, xb := w[b*blockIQ2_S:], xq[b*blockQ8_K:]
		qs, signs := blk[2:2+QKK/8], blk[2+QKK/8:2+QKK/4]
		qh, scales := blk[2+QKK/4:2+QKK/4+QKK/32], blk[2+QKK/4+QKK/32:]
		q8 := xb[4 : 4+QKK]
		var bsum int32
		for ib := range QKK / 32 {
			var sumi [2]int32
			for l := range 4 {
				g := iq2sGrid[int(qs[4*ib+l])|int(qh[ib])<<(8-2*l)&0x300]
				sumi[l/2] += signedDot(g, signs[4*ib+l], q8[32*ib+8*l:], 8)
			}
			bsum += sumi[0]*int32(2*(scales[ib]&0xf)+1) + sumi[1]*int32(2*(scales[ib]>>4)+1)
		}
		d := f16At(blk) * q8KScale(xb)
		sumf += float32(d * float32(bsum)) // float32(): no fused multiply-add
	}
	return 0.125 * sumf
}

// DotIQ3_XXSQ8_K is ggml_vec_dot_iq3_xxs_q8_K (generic): grid entries of
// four magnitudes, signs through ksignsIQ2XS, a scale per 32 values, times
// 1/4. Preconditions as DotIQ2_XXSQ8_K's, with 98 bytes a super-block.
func DotIQ3_XXSQ8_K(w, xq []byte, n int) float32 {
	nb, ok := iqDotOK(w, xq, n, blockIQ3_XXS)
	if !ok {
		return nan
	}
	var sumf float32
	for b := range nb {
		blk, xb := w[b*blockIQ3_XXS:], xq[b*blockQ8_K:]
		qs, ss := blk[2:2+QKK/4], blk[2+QKK/4:]
		q8 := xb[4 : 4+QKK]
		var bsum int32
		for ib := range QKK / 32 {
			aux := binary.LittleEndian.Uint32(ss[4*ib:])
			var sumi int32
			for l := range 4 {
				signs := ksignsIQ2XS[aux>>(7*l)&127]
				g := uint64(iq3xxsGrid[qs[8*ib+2*l]]) | uint64(iq3xxsGrid[qs[8*ib+2*l+1]])<<32
				sumi += signedDot(g, signs, q8[32*ib+8*l:], 8)
			}
			bsum += sumi * int32(2*(aux>>28)+1)
		}
		d := f16At(blk) * q8KScale(xb)
		sumf += float32(d * float32(bsum)) // float32(): no fused multiply-add
	}
	return 0.25 * sumf
}
