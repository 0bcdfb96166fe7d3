package quant

import "encoding/binary"

// IQ4_NL and IQ4_XS store 4-bit indices into one non-linear table of int8
// values (denser near zero, where weights are), instead of 4-bit integers.
// IQ4_NL has a block of 32 with an f16 scale, like Q4_0; IQ4_XS a super-block
// of 256 with an f16 scale and a 6-bit scale per 32 values. Within each 32
// values, index j sits in the low nibble of qs[j] and index j+16 in the high
// one, as in Q4_0.

const (
	blockIQ4_NL = 2 + QK/2               // d f16, qs[16]
	blockIQ4_XS = 2 + 2 + QKK/64 + QKK/2 // d f16, scales_h u16, scales_l[4], qs[128]
)

// IQ4NLValues is ggml's kvalues_iq4nl: the value of each 4-bit index.
var IQ4NLValues = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// iq4XSScale is the 6-bit scale (0..63, stored biased by 32) of the ib-th
// 32 values of an IQ4_XS block: four low bits in scales_l, two high bits in
// scales_h.
func iq4XSScale(blk []byte, ib int) int {
	h := binary.LittleEndian.Uint16(blk[2:])
	return int(blk[4+ib/2]>>(4*(ib%2))&0xf) | int(h>>(2*ib)&3)<<4
}

func dequantizeIQ4_NL(dst []float32, src []byte) {
	nb := len(dst) / QK
	src = src[:nb*blockIQ4_NL]
	for b := range nb {
		blk := src[b*blockIQ4_NL : (b+1)*blockIQ4_NL]
		y := dst[b*QK : (b+1)*QK]
		d := f16At(blk)
		for j, q := range blk[2 : 2+QK/2] {
			y[j] = d * float32(IQ4NLValues[q&0xf])
			y[j+QK/2] = d * float32(IQ4NLValues[q>>4])
		}
	}
}

func dequantizeIQ4_XS(dst []float32, src []byte) {
	nb := len(dst) / QKK
	src = src[:nb*blockIQ4_XS]
	for b := range nb {
		blk := src[b*blockIQ4_XS : (b+1)*blockIQ4_XS]
		d := f16At(blk)
		for ib := range QKK / 32 {
			dl := d * float32(iq4XSScale(blk, ib)-32)
			y := dst[b*QKK+32*ib : b*QKK+32*ib+32]
			for j, q := range blk[8+16*ib : 8+16*ib+16] {
				y[j] = dl * float32(IQ4NLValues[q&0xf])
				y[j+16] = dl * float32(IQ4NLValues[q>>4])
			}
		}
	}
}

// bestIndexIQ4 is ggml's best_index_int8 over IQ4NLValues: the index of the
// value nearest x, the lower one on a tie.
func bestIndexIQ4(x float32) uint8 {
	v := &IQ4NLValues
	if x <= float32(v[0]) {
		return 0
	}
	if x >= float32(v[15]) {
		return 15
	}
	ml, mu := 0, 15
	for mu-ml > 1 {
		mav := (ml + mu) / 2
		if x < float32(v[mav]) {
			mu = mav
		} else {
			ml = mav
		}
	}
	if x-float32(v[mu-1]) < float32(v[mu])-x {
		return uint8(mu - 1)
	}
	return uint8(mu)
}

// iq4Fit is the per-32-values part of ggml's quantize_row_iq4_nl_impl
// without an importance matrix (weights x²): the scale d that best fits
// x ≈ d*value[L], from the scale that maps the largest magnitude onto the
// table's end and then, when ntry > 0, 2*ntry+1 scales around it. L gets the
// indices of the first fit; it is left as it was when the block is all
// (near) zero, as ggml leaves it.
func iq4Fit(x []float32, L []uint8, ntry int) float32 {
	var amax, vmax float32
	for _, v := range x {
		if a := absf(v); a > amax {
			amax, vmax = a, v
		}
	}
	if amax < groupMaxEps {
		return 0
	}
	v0 := float32(IQ4NLValues[0])
	d := vmax / v0
	if ntry > 0 {
		d = -vmax / v0
	}
	id := 1 / d
	var sumqx, sumq2 float32
	for j, xv := range x {
		l := bestIndexIQ4(id * xv)
		L[j] = l
		q := float32(IQ4NLValues[l])
		w := xv * xv
		sumqx += float32(w * q * xv)
		sumq2 += float32(w * q * q)
	}
	d = sumqx / sumq2
	best := d * sumqx
	for itry := -ntry; itry <= ntry; itry++ {
		id = float32(itry+int(IQ4NLValues[0])) / vmax
		sumqx, sumq2 = 0, 0
		for _, xv := range x {
			q := float32(IQ4NLValues[bestIndexIQ4(id*xv)])
			w := xv * xv
			sumqx += float32(w * q * xv)
			sumq2 += float32(w * q * q)
		}
		if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
			d = sumqx / sumq2
			best = d * sumqx
		}
	}
	return d
}

// packIQ4 stores the 4-bit indices of L (a multiple of 32) into qs.
func packIQ4(qs []byte, L []uint8) {
	for i := range len(L) / 32 {
		for j := range 16 {
			qs[16*i+j] = L[32*i+j] | L[32*i+16+j]<<4
		}
	}
}

// quantizeIQ4_NL is ggml's quantize_row_iq4_nl_ref: one fit per block, no
// search around it (ntry -1). Its index buffer lives across blocks, as
// ggml's does, so an all-zero block repeats the previous block's indices
// (they are multiplied by a zero scale).
func quantizeIQ4_NL(dst []byte, src []float32) {
	nb := len(src) / QK
	dst = dst[:nb*blockIQ4_NL]
	var L [QK]uint8
	for b := range nb {
		blk := dst[b*blockIQ4_NL : (b+1)*blockIQ4_NL]
		d := iq4Fit(src[b*QK:(b+1)*QK], L[:], -1)
		putF16(blk, d)
		packIQ4(blk[2:], L[:])
	}
}

// quantizeIQ4_XS is ggml's quantize_row_iq4_xs_ref: a fit per 32 values
// with the search (ntry 7), the scales quantized to 6 bits against the
// super-block scale -max/32 of the largest-magnitude one, and the indices
// chosen again for each quantized scale.
func quantizeIQ4_XS(dst []byte, src []float32) {
	nb := len(src) / QKK
	dst = dst[:nb*blockIQ4_XS]
	var L [QKK]uint8
	var scales [QKK / 32]float32
	for b := range nb {
		x := src[b*QKK : (b+1)*QKK]
		blk := dst[b*blockIQ4_XS : (b+1)*blockIQ4_XS]
		var maxScale, amaxScale float32
		for ib := range scales {
			scales[ib] = iq4Fit(x[32*ib:32*ib+32], L[32*ib:32*ib+32], 7)
			if a := absf(scales[ib]); a > amaxScale {
				amaxScale, maxScale = a, scales[ib]
			}
		}
		d := -maxScale / 32
		putF16(blk, d)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		var sh uint16
		sl := blk[4 : 4+QKK/64]
		clear(sl)
		for ib, s := range scales {
			l := max(-32, min(31, nearestInt(id*s)))
			dl := d * float32(l)
			var idl float32
			if dl != 0 {
				idl = 1 / dl
			}
			for j, xv := range x[32*ib : 32*ib+32] {
				L[32*ib+j] = bestIndexIQ4(idl * xv)
			}
			l += 32
			sl[ib/2] |= byte(l&0xf) << (4 * (ib % 2))
			sh |= uint16(l>>4) << (2 * ib)
		}
		binary.LittleEndian.PutUint16(blk[2:], sh)
		packIQ4(blk[8:], L[:])
	}
}

// DotIQ4_NLQ8_0 is ggml_vec_dot_iq4_nl_q8_0 (generic): per block
// (dx*dw)*(sumi) summed in float32. Preconditions: n >= 0 is a multiple of
// 32, w holds at least n/32*18 bytes and xq n/32*34; otherwise it returns
// NaN.
func DotIQ4_NLQ8_0(w, xq []byte, n int) float32 {
	if n < 0 || n%QK != 0 {
		return nan
	}
	nb := n / QK
	if len(w) < nb*blockIQ4_NL || len(xq) < nb*blockQ8_0 {
		return nan
	}
	var sumf float32
	for b := range nb {
		wb := w[b*blockIQ4_NL : (b+1)*blockIQ4_NL]
		xb := xq[b*blockQ8_0 : (b+1)*blockQ8_0]
		d := f16At(xb) * f16At(wb)
		xv := xb[2 : 2+QK]
		var sumi1, sumi2 int32
		for j, q := range wb[2 : 2+QK/2] {
			sumi1 += int32(int8(xv[j])) * int32(IQ4NLValues[q&0xf])
			sumi2 += int32(int8(xv[j+QK/2])) * int32(IQ4NLValues[q>>4])
		}
		sumf += float32(d * float32(sumi1+sumi2))
	}
	return sumf
}

// DotIQ4_XSQ8_K is ggml_vec_dot_iq4_xs_q8_K (generic): per 32 values
// (dw*dx*(scale-32))*(sumi) summed in float32. Preconditions: n >= 0 is a
// multiple of 256, w holds at least n/256*136 bytes and xq n/256*292;
// otherwise it returns NaN.
func DotIQ4_XSQ8_K(w, xq []byte, n int) float32 {
	if n < 0 || n%QKK != 0 {
		return nan
	}
	nb := n / QKK
	if len(w) < nb*blockIQ4_XS || len(xq) < nb*blockQ8_K {
		return nan
	}
	var sumf float32
	for b := range nb {
		wb := w[b*blockIQ4_XS : (b+1)*blockIQ4_XS]
		xb := xq[b*blockQ8_K : (b+1)*blockQ8_K]
		d4d8 := f16At(wb) * q8KScale(xb)
		q8 := xb[4 : 4+QKK]
		for ib := range QKK / 32 {
			dl := d4d8 * float32(iq4XSScale(wb, ib)-32)
			qs := wb[8+16*ib : 8+16*ib+16]
			xv := q8[32*ib : 32*ib+32]
			var sumi1, sumi2 int32
			for j, q := range qs {
				sumi1 += int32(int8(xv[j])) * int32(IQ4NLValues[q&0xf])
				sumi2 += int32(int8(xv[j+16])) * int32(IQ4NLValues[q>>4])
			}
			sumf += float32(dl * float32(sumi1+sumi2))
		}
	}
	return sumf
}
