package quant

import (
	"encoding/binary"
	"math"
)

// nan is what the dot products return when their preconditions fail: unlike
// a zero, it cannot pass for a real result further down a forward pass.
var nan = float32(math.NaN())

// DotRow returns the dot product of one weight row w of type t with the n =
// len(x) float32 activations x: sum over i of dequant(w)[i]*x[i], with each
// dequantized value exactly as DequantizeRow produces it, the products and the
// running sum in float64 (a float32 product is exact in float64), summed in
// index order, and the total rounded once to float32. It is the reference
// that faster kernels are checked against, so it favours accuracy over speed;
// it does not allocate.
//
// Preconditions: CanDequantize(t), n a whole number of blocks of t, and
// len(w) == t.RowSize(n). If any fails DotRow returns NaN.
func DotRow(t Type, w []byte, x []float32) float32 {
	if !CanDequantize(t) || checkRow("dot", t, len(x), len(w)) != nil {
		return nan
	}
	// Dequantize 256 values at a time: a whole number of blocks of every
	// type, so each chunk is whole blocks, and small enough for the stack.
	var buf [QKK]float32
	bs, ts := t.BlockSize(), t.TypeSize()
	var acc float64
	for i := 0; i < len(x); i += QKK {
		k := min(QKK, len(x)-i)
		off := i / bs * ts
		dequantize(t, buf[:k], w[off:off+k/bs*ts])
		for j, v := range x[i : i+k] {
			acc += float64(buf[j]) * float64(v)
		}
	}
	return float32(acc)
}

// The int8 dot products below take activations already quantized by
// QuantizeRow (Q8_0 or Q8_K) and mirror ggml's generic C kernels
// (ggml_vec_dot_*_generic in ggml-cpu/quants.c): an exact integer dot per
// block, then float32 scaling in ggml's order of operations, so that they
// agree with ggml bit for bit (checked against ggml's C built without FMA
// contraction) and SIMD kernels can be tested against them exactly where they
// keep that order. They do not allocate. Their callers are matmul loops that
// validate shapes once per matrix, so instead of returning errors they return
// NaN when a precondition fails.

// DotQ8_0 is ggml_vec_dot_q8_0_q8_0: the dot of n values of Q8_0 weights w
// with Q8_0 activations xq, per block sumi*(dw*dx) summed in float32.
// Preconditions: n >= 0 is a multiple of 32 and w and xq hold at least
// n/32*34 bytes (only those are read); otherwise it returns NaN.
func DotQ8_0(w, xq []byte, n int) float32 {
	if n < 0 || n%QK != 0 {
		return nan
	}
	nb := n / QK
	size := nb * blockQ8_0
	if len(w) < size || len(xq) < size {
		return nan
	}
	w, xq = w[:size], xq[:size]
	var sumf float32
	for b := range nb {
		wb := w[b*blockQ8_0 : (b+1)*blockQ8_0]
		xb := xq[b*blockQ8_0 : (b+1)*blockQ8_0]
		wq, xv := wb[2:2+QK], xb[2:2+QK]
		var sumi int32
		for j, q := range wq {
			sumi += int32(int8(q)) * int32(int8(xv[j]))
		}
		sumf += float32(float32(sumi) * (f16At(wb) * f16At(xb)))
	}
	return sumf
}

// DotQ4_0Q8_0 is ggml_vec_dot_q4_0_q8_0: the dot of n values of Q4_0 weights
// w with Q8_0 activations xq, per block (sumi*dw)*dx (ggml associates this
// differently from DotQ8_0) summed in float32. Preconditions: n >= 0 is a
// multiple of 32, w holds at least n/32*18 bytes and xq n/32*34; otherwise it
// returns NaN.
func DotQ4_0Q8_0(w, xq []byte, n int) float32 {
	if n < 0 || n%QK != 0 {
		return nan
	}
	nb := n / QK
	if len(w) < nb*blockQ4_0 || len(xq) < nb*blockQ8_0 {
		return nan
	}
	w, xq = w[:nb*blockQ4_0], xq[:nb*blockQ8_0]
	var sumf float32
	for b := range nb {
		wb := w[b*blockQ4_0 : (b+1)*blockQ4_0]
		xb := xq[b*blockQ8_0 : (b+1)*blockQ8_0]
		wq, xv := wb[2:2+QK/2], xb[2:2+QK]
		var sumi0, sumi1 int32
		for j, q := range wq {
			sumi0 += (int32(q&0xf) - 8) * int32(int8(xv[j]))
			sumi1 += (int32(q>>4) - 8) * int32(int8(xv[j+QK/2]))
		}
		sumf += float32(float32(float32(sumi0+sumi1)*f16At(wb)) * f16At(xb))
	}
	return sumf
}

// DotQ5_0Q8_0 is ggml_vec_dot_q5_0_q8_0: Q4_0 with a fifth bit per value
// (bit j of qh for value j), per block (dw*dx)*sumi summed in float32.
// Preconditions: n >= 0 is a multiple of 32, w holds at least n/32*22 bytes
// and xq n/32*34; otherwise it returns NaN.
func DotQ5_0Q8_0(w, xq []byte, n int) float32 {
	if n < 0 || n%QK != 0 {
		return nan
	}
	nb := n / QK
	if len(w) < nb*blockQ5_0 || len(xq) < nb*blockQ8_0 {
		return nan
	}
	var sumf float32
	for b := range nb {
		wb := w[b*blockQ5_0 : (b+1)*blockQ5_0]
		xb := xq[b*blockQ8_0 : (b+1)*blockQ8_0]
		qh := binary.LittleEndian.Uint32(wb[2:6])
		xv := xb[2 : 2+QK]
		var sumi0, sumi1 int32
		for j, q := range wb[6 : 6+QK/2] {
			x0 := int32(q&0xf|byte(qh>>j&1)<<4) - 16
			x1 := int32(q>>4|byte(qh>>(j+QK/2)&1)<<4) - 16
			sumi0 += x0 * int32(int8(xv[j]))
			sumi1 += x1 * int32(int8(xv[j+QK/2]))
		}
		sumf += float32(float32(f16At(wb)*f16At(xb)) * float32(sumi0+sumi1))
	}
	return sumf
}

// DotQ4_1Q8_0 is the dot of Q4_1 weights (value q·d + m) with Q8_0
// activations: per block (d·dy)·Σ q·y + (m·dy)·Σ y in float32, the
// integer sums exact. ggml takes dy·Σ y from Q8_1 activations, rounded to
// f16; this sums it in full. Preconditions: n >= 0 is a multiple of 32, w
// holds at least n/32*20 bytes and xq n/32*34; otherwise it returns NaN.
func DotQ4_1Q8_0(w, xq []byte, n int) float32 { return dotOffset(w, xq, n, false) }

// DotQ5_1Q8_0 is DotQ4_1Q8_0 for Q5_1 weights (a fifth bit per value).
func DotQ5_1Q8_0(w, xq []byte, n int) float32 { return dotOffset(w, xq, n, true) }

func dotOffset(w, xq []byte, n int, five bool) float32 {
	bs := blockQ4_1
	if five {
		bs = blockQ5_1
	}
	if n < 0 || n%QK != 0 {
		return nan
	}
	nb := n / QK
	if len(w) < nb*bs || len(xq) < nb*blockQ8_0 {
		return nan
	}
	var sumf float32
	for b := range nb {
		wb := w[b*bs : (b+1)*bs]
		xb := xq[b*blockQ8_0 : (b+1)*blockQ8_0]
		var qh uint32
		qs := wb[4 : 4+QK/2]
		if five {
			qh = binary.LittleEndian.Uint32(wb[4:8])
			qs = wb[8 : 8+QK/2]
		}
		xv := xb[2 : 2+QK]
		var sumi, sumy int32
		for j, q := range qs {
			x0 := int32(q&0xf | byte(qh>>j&1)<<4)
			x1 := int32(q>>4 | byte(qh>>(j+QK/2)&1)<<4)
			y0, y1 := int32(int8(xv[j])), int32(int8(xv[j+QK/2]))
			sumi += x0*y0 + x1*y1
			sumy += y0 + y1
		}
		dy := f16At(xb)
		sumf += float32(float32(float32(f16At(wb)*dy)*float32(sumi)) + float32(float32(f16At(wb[2:])*dy)*float32(sumy)))
	}
	return sumf
}

// DotQ2_KQ8_K is ggml_vec_dot_q2_K_q8_K (generic): per super-block the
// 2-bit quants times each 16 values' 4-bit scale, the mins through the
// activations' 16-value sums, (dx*dw)*isum - (dx*dmin)*summs summed in
// float32. Preconditions: n >= 0 is a multiple of 256, w holds at least
// n/256*84 bytes and xq n/256*292; otherwise it returns NaN.
func DotQ2_KQ8_K(w, xq []byte, n int) float32 {
	if n < 0 || n%QKK != 0 {
		return nan
	}
	nb := n / QKK
	if len(w) < nb*blockQ2_K || len(xq) < nb*blockQ8_K {
		return nan
	}
	var sumf float32
	for b := range nb {
		wb := w[b*blockQ2_K : (b+1)*blockQ2_K]
		xb := xq[b*blockQ8_K : (b+1)*blockQ8_K]
		sc, q8 := wb[:16], xb[4:4+QKK]
		var summs, isum int32
		for j := range 16 {
			summs += int32(int16(binary.LittleEndian.Uint16(xb[4+QKK+2*j:]))) * int32(sc[j]>>4)
		}
		for j := range 16 { // 16 values each, in value order
			q2 := wb[16+32*(j/8) : 16+32*(j/8)+32]
			shift, half := 2*(j%8/2), 16*(j%2)
			var isuml int32
			for l := range 16 {
				isuml += int32(int8(q8[16*j+l])) * int32(q2[half+l]>>shift&3)
			}
			isum += int32(sc[j]&0xf) * isuml
		}
		dy := q8KScale(xb)
		dall, dmin := dy*f16At(wb[80:]), dy*f16At(wb[82:])
		sumf += float32(float32(dall*float32(isum)) - float32(dmin*float32(summs)))
	}
	return sumf
}

// DotQ3_KQ8_K is ggml_vec_dot_q3_K_q8_K (generic): the 3-bit values (two
// bits in qs, the third in hmask, -4 where it is clear) times each 16
// values' 6-bit scale less 32, accumulated exactly in eight lanes (value i
// in lane i%8), then (dw*dx)*lane summed in float32 per lane across
// super-blocks. Preconditions: n >= 0 is a multiple of 256, w holds at
// least n/256*110 bytes and xq n/256*292; otherwise it returns NaN.
func DotQ3_KQ8_K(w, xq []byte, n int) float32 {
	if n < 0 || n%QKK != 0 {
		return nan
	}
	nb := n / QKK
	if len(w) < nb*blockQ3_K || len(xq) < nb*blockQ8_K {
		return nan
	}
	var sums [8]float32
	for b := range nb {
		wb := w[b*blockQ3_K : (b+1)*blockQ3_K]
		xb := xq[b*blockQ8_K : (b+1)*blockQ8_K]
		hm, q8 := wb[:32], xb[4:4+QKK]
		var aux32 [8]int32
		for i := range QKK {
			chunk, k, l := i/128, i%128/32, i%32
			v := int32(wb[32+32*chunk+l] >> (2 * k) & 3)
			if hm[l]&(1<<(4*chunk+k)) == 0 {
				v -= 4
			}
			aux32[i%8] += int32(scaleQ3K(i/16, wb[96:108])) * int32(int16(v*int32(int8(q8[i]))))
		}
		d := f16At(wb[108:]) * q8KScale(xb)
		for l, a := range aux32 {
			sums[l] += float32(d * float32(a))
		}
	}
	var sumf float32
	for _, s := range sums {
		sumf += s
	}
	return sumf
}

// q8KScale reads the float32 d of a Q8_K block.
func q8KScale(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) }

// DotQ4_KQ8_K is ggml_vec_dot_q4_K_q8_K: the dot of n values of Q4_K weights
// w with Q8_K activations xq. Preconditions: n >= 0 is a multiple of 256, w
// holds at least n/256*144 bytes and xq n/256*292; otherwise it returns NaN.
//
// The mins are applied through the activations' 16-value
// block sums (sum_j bsums[j]*min[j/2]), so the inner loop is a plain
// unsigned-nibble times int8 product. ggml accumulates the scaled products in
// eight lanes (value index mod 8), each scaled to float32 per block and summed
// after all the min terms; this keeps that order.
func DotQ4_KQ8_K(w, xq []byte, n int) float32 {
	if n < 0 || n%QKK != 0 {
		return nan
	}
	nb := n / QKK
	if len(w) < nb*blockQ4_K || len(xq) < nb*blockQ8_K {
		return nan
	}
	w, xq = w[:nb*blockQ4_K], xq[:nb*blockQ8_K]
	var sums [8]float32
	var sumf float32
	for b := range nb {
		wb := w[b*blockQ4_K : (b+1)*blockQ4_K]
		xb := xq[b*blockQ8_K : (b+1)*blockQ8_K]
		scales := wb[4:16]
		q8 := xb[4 : 4+QKK]
		var aux32 [8]int32
		var mins [8]int32
		for j := range QKK / 64 {
			q4 := wb[16+32*j : 16+32*j+32]
			sc1, m1 := scaleMinK4(2*j, scales)
			sc2, m2 := scaleMinK4(2*j+1, scales)
			mins[2*j], mins[2*j+1] = int32(m1), int32(m2)
			lo := q8[64*j : 64*j+32]
			hi := q8[64*j+32 : 64*j+64]
			for l, q := range q4 {
				aux32[l&7] += int32(sc1) * int32(q&0xf) * int32(int8(lo[l]))
				aux32[l&7] += int32(sc2) * int32(q>>4) * int32(int8(hi[l]))
			}
		}
		var sumi int32
		for j := range QKK / 16 {
			bsum := int16(binary.LittleEndian.Uint16(xb[4+QKK+2*j:]))
			sumi += int32(bsum) * mins[j/2]
		}
		dy := q8KScale(xb)
		d := f16At(wb) * dy
		for l, a := range aux32 {
			sums[l] += float32(d * float32(a))
		}
		dmin := f16At(wb[2:]) * dy
		sumf -= float32(dmin * float32(sumi))
	}
	for _, s := range sums {
		sumf += s
	}
	return sumf
}

// DotQ5_KQ8_K is ggml_vec_dot_q5_K_q8_K: DotQ4_KQ8_K with a fifth bit per
// value (qh), in the same eight-lane order. Preconditions: n >= 0 is a
// multiple of 256, w holds at least n/256*176 bytes and xq n/256*292;
// otherwise it returns NaN.
func DotQ5_KQ8_K(w, xq []byte, n int) float32 {
	if n < 0 || n%QKK != 0 {
		return nan
	}
	nb := n / QKK
	if len(w) < nb*blockQ5_K || len(xq) < nb*blockQ8_K {
		return nan
	}
	w, xq = w[:nb*blockQ5_K], xq[:nb*blockQ8_K]
	var sums [8]float32
	var sumf float32
	for b := range nb {
		wb := w[b*blockQ5_K : (b+1)*blockQ5_K]
		xb := xq[b*blockQ8_K : (b+1)*blockQ8_K]
		scales, qh := wb[4:16], wb[16:48]
		q8 := xb[4 : 4+QKK]
		var aux32 [8]int32
		var mins [8]int32
		for j := range QKK / 64 {
			ql := wb[48+32*j : 48+32*j+32]
			sc1, m1 := scaleMinK4(2*j, scales)
			sc2, m2 := scaleMinK4(2*j+1, scales)
			mins[2*j], mins[2*j+1] = int32(m1), int32(m2)
			lo := q8[64*j : 64*j+32]
			hi := q8[64*j+32 : 64*j+64]
			for l, q := range ql {
				h := qh[l] >> (2 * j)
				aux32[l&7] += int32(sc1) * int32(q&0xf|(h&1)<<4) * int32(int8(lo[l]))
				aux32[l&7] += int32(sc2) * int32(q>>4|(h>>1&1)<<4) * int32(int8(hi[l]))
			}
		}
		var sumi int32
		for j := range QKK / 16 {
			bsum := int16(binary.LittleEndian.Uint16(xb[4+QKK+2*j:]))
			sumi += int32(bsum) * mins[j/2]
		}
		dy := q8KScale(xb)
		d := f16At(wb) * dy
		for l, a := range aux32 {
			sums[l] += float32(d * float32(a))
		}
		dmin := f16At(wb[2:]) * dy
		sumf -= float32(dmin * float32(sumi))
	}
	for _, s := range sums {
		sumf += s
	}
	return sumf
}

// DotQ6_KQ8_K is ggml_vec_dot_q6_K_q8_K: the dot of n values of Q6_K weights
// w with Q8_K activations xq, with the same eight-lane accumulation as
// DotQ4_KQ8_K. Preconditions: n >= 0 is a multiple of 256, w holds at least
// n/256*210 bytes and xq n/256*292; otherwise it returns NaN.
func DotQ6_KQ8_K(w, xq []byte, n int) float32 {
	if n < 0 || n%QKK != 0 {
		return nan
	}
	nb := n / QKK
	if len(w) < nb*blockQ6_K || len(xq) < nb*blockQ8_K {
		return nan
	}
	w, xq = w[:nb*blockQ6_K], xq[:nb*blockQ8_K]
	var sums [8]float32
	for b := range nb {
		wb := w[b*blockQ6_K : (b+1)*blockQ6_K]
		xb := xq[b*blockQ8_K : (b+1)*blockQ8_K]
		var aux32 [8]int32
		for n := 0; n < QKK; n += 128 {
			ql := wb[n/2 : n/2+64]
			qh := wb[128+n/4 : 128+n/4+32]
			sc := wb[192+n/16 : 192+n/16+8]
			q8 := xb[4+n : 4+n+128]
			for l := range 32 {
				is := l / 16
				q1, q2, q3, q4 := q6K(ql, qh, l)
				a := &aux32[l&7]
				*a += int32(int8(sc[is])) * int32(q1) * int32(int8(q8[l]))
				*a += int32(int8(sc[is+2])) * int32(q2) * int32(int8(q8[l+32]))
				*a += int32(int8(sc[is+4])) * int32(q3) * int32(int8(q8[l+64]))
				*a += int32(int8(sc[is+6])) * int32(q4) * int32(int8(q8[l+96]))
			}
		}
		d := f16At(wb[208:]) * q8KScale(xb)
		for l, a := range aux32 {
			sums[l] += float32(d * float32(a))
		}
	}
	var sumf float32
	for _, s := range sums {
		sumf += s
	}
	return sumf
}
