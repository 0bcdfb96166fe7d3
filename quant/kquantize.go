package quant

import (
	"encoding/binary"
	"math"
)

// The k-quant quantizers below follow ggml's *_ref functions operation for
// operation, in float32, with explicit float32() conversions wherever Go could
// otherwise fuse a multiply and an add into an FMA: ggml's reference output is
// defined by unfused float arithmetic, and model files made here should match
// the ones llama-quantize makes.

// groupMaxEps is ggml's GROUP_MAX_EPS: groups whose largest magnitude is
// below it are stored as all zeros.
const groupMaxEps = 1e-15

// nearestInt is ggml's nearest_int: round to nearest, ties to even, via the
// 1.5*2^23 trick. It is exact for |v| <= 2^22 and, unlike a float-to-int
// conversion, defined (if meaningless) for every other input.
func nearestInt(v float32) int {
	val := v + 12582912
	return int(math.Float32bits(val)&0x007fffff) - 0x00400000
}

// quantizeQ8_K is ggml's quantize_row_q8_K_ref. The scale is the signed value
// of largest magnitude over -127, so it is negative when that value is
// positive: quants come out negated and d flips them back. Unlike ggml, an
// all-zero block also gets zero block sums rather than stale memory.
func quantizeQ8_K(dst []byte, src []float32) {
	nb := len(src) / QKK
	dst = dst[:nb*blockQ8_K]
	for b := range nb {
		x := src[b*QKK : (b+1)*QKK]
		blk := dst[b*blockQ8_K : (b+1)*blockQ8_K]
		var amax, vmax float32
		for _, v := range x {
			if a := absf(v); a > amax {
				amax, vmax = a, v
			}
		}
		qs := blk[4 : 4+QKK]
		if amax == 0 {
			clear(blk)
			continue
		}
		iscale := -127 / vmax
		for j, v := range x {
			qs[j] = byte(int8(min(127, nearestInt(iscale*v))))
		}
		for j := range QKK / 16 {
			sum := 0
			for _, q := range qs[16*j : 16*j+16] {
				sum += int(int8(q))
			}
			binary.LittleEndian.PutUint16(blk[4+QKK+2*j:], uint16(int16(sum)))
		}
		binary.LittleEndian.PutUint32(blk, math.Float32bits(1/iscale))
	}
}

// makeQKX2Quants is ggml's make_qkx2_quants: it fits x ≈ scale*L - min with
// L in [0, nmax], min >= 0, minimising the weighted error, by trying nstep+1
// candidate scales around nmax/(max-min) and refining each by least squares.
// It returns the scale and the (positive) min.
func makeQKX2Quants(nmax int, x, weights []float32, L, Laux []uint8, rmin, rdelta float32, nstep int, useMAD bool) (scale, theMin float32) {
	n := len(x)
	L, Laux, weights = L[:n], Laux[:n], weights[:n]
	lo, hi := x[0], x[0]
	sumW := weights[0]
	sumX := sumW * x[0]
	for i := 1; i < n; i++ {
		// Comparisons, not min/max: ggml's treat -0 and NaN differently.
		if x[i] < lo {
			lo = x[i]
		}
		if x[i] > hi {
			hi = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		clear(L)
		return 0, -lo
	}
	fnmax := float32(nmax)
	iscale := fnmax / (hi - lo)
	scale = 1 / iscale
	var bestError float32
	for i := range n {
		l := nearestInt(iscale * (x[i] - lo))
		L[i] = uint8(max(0, min(nmax, l)))
		diff := float32(float32(scale*float32(L[i]))+lo) - x[i]
		if useMAD {
			diff = absf(diff)
		} else {
			diff *= diff
		}
		bestError += float32(weights[i] * diff)
	}
	if nstep < 1 {
		return scale, -lo
	}
	for is := 0; is <= nstep; is++ {
		iscale = (float32(rmin+float32(rdelta*float32(is))) + fnmax) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i := range n {
			l := nearestInt(iscale * (x[i] - lo))
			l = max(0, min(nmax, l))
			Laux[i] = uint8(l)
			w := weights[i]
			wl := w * float32(l)
			sumL += wl
			sumL2 += float32(wl * float32(l))
			sumXL += float32(wl * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var curError float32
			for i := range n {
				diff := float32(float32(thisScale*float32(Laux[i]))+thisMin) - x[i]
				if useMAD {
					diff = absf(diff)
				} else {
					diff *= diff
				}
				curError += float32(weights[i] * diff)
			}
			if curError < bestError {
				copy(L, Laux)
				bestError = curError
				scale = thisScale
				lo = thisMin
			}
		}
	}
	return scale, -lo
}

// quantizeQ4_K is ggml's quantize_row_q4_K_ref (no importance matrix): an
// affine fit per 32-value sub-block, then the eight scales and mins are
// themselves quantized to six bits against the super-block's d and dmin, and
// the values are requantized against the rounded scales.
func quantizeQ4_K(dst []byte, src []float32) {
	nb := len(src) / QKK
	dst = dst[:nb*blockQ4_K]
	var (
		L       [QKK]uint8
		Laux    [32]uint8
		weights [32]float32
		mins    [QKK / 32]float32
		scales  [QKK / 32]float32
		ls, lm  [QKK / 32]uint8
	)
	for b := range nb {
		x := src[b*QKK : (b+1)*QKK]
		blk := dst[b*blockQ4_K : (b+1)*blockQ4_K]
		var maxScale, maxMin float32
		for j := range QKK / 32 {
			xs := x[32*j : 32*j+32]
			var sumX2 float32
			for _, v := range xs {
				sumX2 += float32(v * v)
			}
			avX := float32(math.Sqrt(float64(sumX2 / 32)))
			for l, v := range xs {
				weights[l] = avX + absf(v)
			}
			scales[j], mins[j] = makeQKX2Quants(15, xs, weights[:], L[32*j:32*j+32], Laux[:], -1, 0.1, 20, false)
			if scales[j] > maxScale {
				maxScale = scales[j]
			}
			if mins[j] > maxMin {
				maxMin = mins[j]
			}
		}
		var invScale, invMin float32
		if maxScale > 0 {
			invScale = 63 / maxScale
		}
		if maxMin > 0 {
			invMin = 63 / maxMin
		}
		for j := range QKK / 32 {
			ls[j] = min(63, uint8(nearestInt(invScale*scales[j])))
			lm[j] = min(63, uint8(nearestInt(invMin*mins[j])))
		}
		putScaleMinK4(blk[4:16], &ls, &lm)
		putF16(blk, maxScale/63)
		putF16(blk[2:], maxMin/63)
		d, dmin := f16At(blk), f16At(blk[2:])
		for j := range QKK / 32 {
			sc, m := scaleMinK4(j, blk[4:16])
			dj := d * float32(sc)
			if dj == 0 {
				continue // ggml keeps the first fit's quants here
			}
			dm := dmin * float32(m)
			for i, v := range x[32*j : 32*j+32] {
				L[32*j+i] = uint8(max(0, min(15, nearestInt((v+dm)/dj))))
			}
		}
		qs := blk[16 : 16+QKK/2]
		for j := 0; j < QKK; j += 64 {
			q := qs[j/2 : j/2+32]
			for l := range q {
				q[l] = L[j+l] | L[j+l+32]<<4
			}
		}
	}
}

// quantizeQ5_K is ggml's quantize_row_q5_K_ref (no importance matrix):
// Q4_K's fit with 32 levels, the fifth bit of each value in qh (bit 2j of
// qh[l] for value 64j+l, bit 2j+1 for value 64j+32+l).
func quantizeQ5_K(dst []byte, src []float32) {
	nb := len(src) / QKK
	dst = dst[:nb*blockQ5_K]
	var (
		L       [QKK]uint8
		Laux    [32]uint8
		weights [32]float32
		mins    [QKK / 32]float32
		scales  [QKK / 32]float32
		ls, lm  [QKK / 32]uint8
	)
	for b := range nb {
		x := src[b*QKK : (b+1)*QKK]
		blk := dst[b*blockQ5_K : (b+1)*blockQ5_K]
		clear(blk[4:16]) // putScaleMinK4 ors the top bits in
		var maxScale, maxMin float32
		for j := range QKK / 32 {
			xs := x[32*j : 32*j+32]
			var sumX2 float32
			for _, v := range xs {
				sumX2 += float32(v * v)
			}
			avX := float32(math.Sqrt(float64(sumX2 / 32)))
			for l, v := range xs {
				weights[l] = avX + absf(v)
			}
			scales[j], mins[j] = makeQKX2Quants(31, xs, weights[:], L[32*j:32*j+32], Laux[:], -0.5, 0.1, 15, false)
			maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
		}
		var invScale, invMin float32
		if maxScale > 0 {
			invScale = 63 / maxScale
		}
		if maxMin > 0 {
			invMin = 63 / maxMin
		}
		for j := range QKK / 32 {
			ls[j] = min(63, uint8(nearestInt(invScale*scales[j])))
			lm[j] = min(63, uint8(nearestInt(invMin*mins[j])))
		}
		putScaleMinK4(blk[4:16], &ls, &lm)
		putF16(blk, maxScale/63)
		putF16(blk[2:], maxMin/63)
		d, dmin := f16At(blk), f16At(blk[2:])
		for j := range QKK / 32 {
			sc, m := scaleMinK4(j, blk[4:16])
			dj := d * float32(sc)
			if dj == 0 {
				continue // ggml keeps the first fit's quants here
			}
			dm := dmin * float32(m)
			for i, v := range x[32*j : 32*j+32] {
				L[32*j+i] = uint8(max(0, min(31, nearestInt((v+dm)/dj))))
			}
		}
		qh, ql := blk[16:48], blk[48:48+QKK/2]
		clear(qh)
		for j := 0; j < QKK/64; j++ {
			q := ql[32*j : 32*j+32]
			for l := range q {
				l1, l2 := L[64*j+l], L[64*j+32+l]
				qh[l] |= (l1>>4)<<(2*j) | (l2>>4)<<(2*j+1)
				q[l] = l1&0xf | (l2&0xf)<<4
			}
		}
	}
}

// makeQXQuants is ggml's make_qx_quants with rmse_type 1 and no importance
// weights, the only variant the reference quantizers use: a symmetric fit
// x ≈ scale*(L-nmax), L in [0, 2*nmax), weighted by x², trying 19 candidate
// scales around -nmax/max and keeping the best least-squares one.
func makeQXQuants(nmax int, x []float32, L []int8) float32 {
	n := len(x)
	L = L[:n]
	var vmax, amax float32
	for _, v := range x {
		if a := absf(v); a > amax {
			amax, vmax = a, v
		}
	}
	if amax < groupMaxEps {
		clear(L)
		return 0
	}
	fnmax := float32(nmax)
	iscale := -fnmax / vmax
	var sumLX, sumL2 float32
	for i, v := range x {
		l := max(-nmax, min(nmax-1, nearestInt(iscale*v)))
		L[i] = int8(l + nmax)
		w := v * v
		sumLX += float32(float32(w*v) * float32(l))
		sumL2 += float32(float32(w*float32(l)) * float32(l))
	}
	var scale float32
	if sumL2 != 0 {
		scale = sumLX / sumL2
	}
	best := scale * sumLX
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(fnmax + float32(0.1*float32(is))) / vmax
		sumLX, sumL2 = 0, 0
		for _, v := range x {
			l := float32(max(-nmax, min(nmax-1, nearestInt(iscale*v))))
			w := v * v
			sumLX += float32(float32(w*v) * l)
			sumL2 += float32(float32(w*l) * l)
		}
		if sumL2 > 0 && float32(sumLX*sumLX) > float32(best*sumL2) {
			for i, v := range x {
				L[i] = int8(nmax + max(-nmax, min(nmax-1, nearestInt(iscale*v))))
			}
			scale = sumLX / sumL2
			best = scale * sumLX
		}
	}
	return scale
}

// quantizeQ6_K is ggml's quantize_row_q6_K_ref: a symmetric fit per 16-value
// sub-block, the sixteen scales quantized to signed bytes against d = -max/128,
// then the values requantized against the rounded scales.
func quantizeQ6_K(dst []byte, src []float32) {
	nb := len(src) / QKK
	dst = dst[:nb*blockQ6_K]
	var (
		L      [QKK]int8
		scales [QKK / 16]float32
	)
	for b := range nb {
		x := src[b*QKK : (b+1)*QKK]
		blk := dst[b*blockQ6_K : (b+1)*blockQ6_K]
		var maxScale, maxAbsScale float32
		for ib := range QKK / 16 {
			s := makeQXQuants(32, x[16*ib:16*ib+16], L[16*ib:16*ib+16])
			scales[ib] = s
			if a := absf(s); a > maxAbsScale {
				maxAbsScale, maxScale = a, s
			}
		}
		if maxAbsScale < groupMaxEps {
			clear(blk)
			continue
		}
		iscale := -128 / maxScale
		putF16(blk[208:], 1/iscale)
		sc := blk[192:208]
		for ib := range sc {
			sc[ib] = byte(int8(min(127, nearestInt(iscale*scales[ib]))))
		}
		d := f16At(blk[208:])
		for j := range QKK / 16 {
			dj := d * float32(int8(sc[j]))
			if dj == 0 {
				continue
			}
			for i, v := range x[16*j : 16*j+16] {
				L[16*j+i] = int8(max(-32, min(31, nearestInt(v/dj))) + 32)
			}
		}
		for j := 0; j < QKK; j += 128 {
			ql := blk[j/2 : j/2+64]
			qh := blk[128+j/4 : 128+j/4+32]
			for l := range 32 {
				q1, q2, q3, q4 := uint8(L[j+l]), uint8(L[j+l+32]), uint8(L[j+l+64]), uint8(L[j+l+96])
				ql[l] = q1&0xf | (q3&0xf)<<4
				ql[l+32] = q2&0xf | (q4&0xf)<<4
				qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
			}
		}
	}
}

// quantizeQ2_K is ggml's quantize_row_q2_K_ref: an affine fit with four
// levels per 16 values (weights |x|), the sixteen scales and mins quantized
// to four bits against the super-block's d and dmin, and the values
// requantized against the rounded ones.
func quantizeQ2_K(dst []byte, src []float32) {
	nb := len(src) / QKK
	dst = dst[:nb*blockQ2_K]
	var (
		L       [QKK]uint8
		Laux    [16]uint8
		weights [16]float32
		mins    [QKK / 16]float32
		scales  [QKK / 16]float32
	)
	for b := range nb {
		x := src[b*QKK : (b+1)*QKK]
		blk := dst[b*blockQ2_K : (b+1)*blockQ2_K]
		sc := blk[:16]
		var maxScale, maxMin float32
		for j := range QKK / 16 {
			xs := x[16*j : 16*j+16]
			for l, v := range xs {
				weights[l] = absf(v)
			}
			scales[j], mins[j] = makeQKX2Quants(3, xs, weights[:], L[16*j:16*j+16], Laux[:], -0.5, 0.1, 15, true)
			maxScale = max(maxScale, scales[j])
			maxMin = max(maxMin, mins[j])
		}
		clear(sc)
		putF16(blk[80:], 0)
		putF16(blk[82:], 0)
		if maxScale > 0 {
			iscale := 15 / maxScale
			for j := range sc {
				sc[j] = byte(nearestInt(iscale * scales[j]))
			}
			putF16(blk[80:], maxScale/15)
		}
		if maxMin > 0 {
			iscale := 15 / maxMin
			for j := range sc {
				sc[j] |= byte(nearestInt(iscale*mins[j])) << 4
			}
			putF16(blk[82:], maxMin/15)
		}
		d, dmin := f16At(blk[80:]), f16At(blk[82:])
		for j := range QKK / 16 {
			dj := d * float32(sc[j]&0xf)
			if dj == 0 {
				continue // ggml keeps the first fit's quants here
			}
			dm := dmin * float32(sc[j]>>4)
			for i, v := range x[16*j : 16*j+16] {
				L[16*j+i] = uint8(max(0, min(3, nearestInt((v+dm)/dj))))
			}
		}
		packQ2(blk[16:80], L[:])
	}
}

// packQ2 stores 2-bit values: per 128, byte l holds values l, l+32, l+64
// and l+96 at shifts 0, 2, 4 and 6.
func packQ2(qs []byte, L []uint8) {
	for j := 0; j < QKK; j += 128 {
		for l := range 32 {
			qs[j/4+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
		}
	}
}

// makeQ3Quants is ggml's make_q3_quants with do_rmse: a symmetric fit
// x ≈ scale*L with L in [-nmax, nmax-1], weights x², refined value by value
// for up to five passes; it returns the scale and leaves L biased by nmax.
func makeQ3Quants(nmax int, x []float32, L []int8) float32 {
	var vmax, amax float32
	for _, v := range x {
		if a := absf(v); a > amax {
			amax, vmax = a, v
		}
	}
	if amax < groupMaxEps {
		clear(L[:len(x)])
		return 0
	}
	iscale := float32(-nmax) / vmax
	var sumlx, suml2 float32
	for i, v := range x {
		l := max(-nmax, min(nmax-1, nearestInt(iscale*v)))
		L[i] = int8(l)
		w := v * v
		sumlx += float32(w * v * float32(l))
		suml2 += float32(w * float32(l) * float32(l))
	}
	for range 5 {
		changed := 0
		for i, v := range x {
			w := v * v
			slx := sumlx - float32(w*v*float32(L[i]))
			if slx > 0 {
				sl2 := suml2 - float32(w*float32(L[i])*float32(L[i]))
				nl := max(-nmax, min(nmax-1, nearestInt(v*sl2/slx)))
				if nl != int(L[i]) {
					slx += float32(w * v * float32(nl))
					sl2 += float32(w * float32(nl) * float32(nl))
					if sl2 > 0 && float32(float32(slx*slx)*suml2) > float32(float32(sumlx*sumlx)*sl2) {
						L[i], sumlx, suml2 = int8(nl), slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := range x {
		L[i] += int8(nmax)
	}
	return sumlx / suml2
}

// quantizeQ3_K is ggml's quantize_row_q3_K_ref: a symmetric fit with eight
// levels per 16 values, the sixteen scales quantized to six bits against
// d = -max/32, the values requantized against the rounded scales, their
// third bit in hmask.
func quantizeQ3_K(dst []byte, src []float32) {
	nb := len(src) / QKK
	dst = dst[:nb*blockQ3_K]
	var (
		L      [QKK]int8
		scales [QKK / 16]float32
	)
	for b := range nb {
		x := src[b*QKK : (b+1)*QKK]
		blk := dst[b*blockQ3_K : (b+1)*blockQ3_K]
		hm, qs, sc := blk[:32], blk[32:96], blk[96:108]
		var maxScale, amax float32
		for j := range QKK / 16 {
			scales[j] = makeQ3Quants(4, x[16*j:16*j+16], L[16*j:16*j+16])
			if a := absf(scales[j]); a > amax {
				amax, maxScale = a, scales[j]
			}
		}
		clear(sc)
		putF16(blk[108:], 0)
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := range QKK / 16 {
				l := int(max(-32, min(31, int8(nearestInt(iscale*scales[j]))))) + 32
				if j < 8 {
					sc[j] = byte(l & 0xf)
				} else {
					sc[j-8] |= byte(l&0xf) << 4
				}
				sc[8+j%4] |= byte(l>>4) << (2 * (j / 4))
			}
			putF16(blk[108:], 1/iscale)
		}
		d := f16At(blk[108:])
		for j := range QKK / 16 {
			dj := d * float32(scaleQ3K(j, sc))
			if dj == 0 {
				continue
			}
			for i, v := range x[16*j : 16*j+16] {
				L[16*j+i] = int8(max(-4, min(3, nearestInt(v/dj))) + 4)
			}
		}
		clear(hm)
		var L2 [QKK]uint8
		for j, l := range L {
			if l > 3 {
				hm[j%32] |= 1 << (j / 32)
				l -= 4
			}
			L2[j] = uint8(l)
		}
		packQ2(qs, L2[:])
	}
}
