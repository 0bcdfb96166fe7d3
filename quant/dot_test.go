package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// randomRow returns n values of type typ as random bytes with sane scales:
// every quant bit pattern occurs, but f16 scales are drawn from [-2, 2] so
// that no block decodes to inf or NaN.
func randomRow(r *rand.Rand, typ Type, n int) []byte {
	size, err := typ.RowSize(n)
	if err != nil {
		panic(err)
	}
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	scale := func() uint16 { return F32ToF16(float32(r.Float64()*4 - 2)) }
	var f16s []int // offsets of f16 fields within a block
	switch typ {
	case F32:
		for i := 0; i < size; i += 4 {
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(float32(r.NormFloat64())))
		}
		return b
	case F16, BF16:
		for i := 0; i < size; i += 2 {
			if typ == F16 {
				le16(b[i:], scale())
			} else {
				le16(b[i:], F32ToBF16(float32(r.NormFloat64())))
			}
		}
		return b
	case IQ1_M:
		// The f16 scale is spread over the top nibbles of the four scale
		// words (bytes 49, 51, 53, 55's high halves).
		for i := 0; i < size; i += blockIQ1_M {
			h := scale()
			for k := range 4 {
				o := i + blockIQ1_M - 8 + 2*k + 1
				b[o] = b[o]&0x0f | byte(h>>(4*k)&0xf)<<4
			}
		}
		return b
	case Q4_0, Q5_0, Q8_0, Q4_K, Q5_K, IQ4_NL, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S:
		f16s = []int{0}
		if typ == Q4_K || typ == Q5_K {
			f16s = []int{0, 2}
		}
	case Q4_1, Q5_1, Q8_1:
		f16s = []int{0, 2}
	case Q2_K:
		f16s = []int{80, 82}
	case Q3_K:
		f16s = []int{108}
	case Q6_K:
		f16s = []int{208}
	case Q8_K:
		for i := 0; i < size; i += blockQ8_K {
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(float32(r.Float64()*0.02-0.01)))
		}
		return b
	}
	for i := 0; i < size; i += typ.TypeSize() {
		for _, o := range f16s {
			le16(b[i+o:], scale())
		}
	}
	return b
}

func randomFloats(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

var allDequantTypes = []Type{F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS,
	IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M}

// TestDotRow: DotRow is documented as the float64 sum, in index order, of
// the dequantized row times x, rounded once, so it must match that exactly.
func TestDotRow(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, typ := range allDequantTypes {
		for _, n := range []int{QKK, 3 * QKK, 5 * QKK} {
			w := randomRow(r, typ, n)
			x := randomFloats(r, n)
			y := dequant(t, typ, w, n)
			var want, mag float64
			for i := range y {
				want += float64(y[i]) * float64(x[i])
				mag += math.Abs(float64(y[i]) * float64(x[i]))
			}
			got := DotRow(typ, w, x)
			if got != float32(want) {
				t.Errorf("DotRow(%v, n=%d) = %v, want %v", typ, n, got, float32(want))
			}
			// And so, within 1e-5 of the dot's magnitude, the float32 dot.
			var f32 float32
			for i := range y {
				f32 += y[i] * x[i]
			}
			if d := math.Abs(float64(f32) - want); d > 1e-5*mag {
				t.Errorf("DotRow(%v, n=%d): float32 dot %v differs by %g (magnitude %g)", typ, n, f32, d, mag)
			}
		}
	}
	// Rows shorter than 256 values, for the 32-value formats.
	for _, typ := range []Type{F16, Q4_0, Q8_0, Q5_1} {
		n := 3 * QK
		w, x := randomRow(r, typ, n), randomFloats(r, n)
		y := dequant(t, typ, w, n)
		var want float64
		for i := range y {
			want += float64(y[i]) * float64(x[i])
		}
		if got := DotRow(typ, w, x); got != float32(want) {
			t.Errorf("DotRow(%v, n=%d) = %v, want %v", typ, n, got, float32(want))
		}
	}
}

func TestDotPreconditions(t *testing.T) {
	isNaN := func(f float32) bool { return f != f }
	q8 := make([]byte, 2*blockQ8_0)
	q4 := make([]byte, 2*blockQ4_0)
	q4k := make([]byte, blockQ4_K)
	q6k := make([]byte, blockQ6_K)
	q8k := make([]byte, blockQ8_K)
	for name, v := range map[string]float32{
		"DotRow bad length":     DotRow(Q8_0, q8[:67], make([]float32, 64)),
		"DotRow partial block":  DotRow(Q8_0, q8, make([]float32, 63)),
		"DotRow unsupported":    DotRow(I8, make([]byte, 4), make([]float32, 4)),
		"DotQ8_0 short w":       DotQ8_0(q8[:60], q8, 64),
		"DotQ8_0 short x":       DotQ8_0(q8, q8[:33], 64),
		"DotQ8_0 bad n":         DotQ8_0(q8, q8, 48),
		"DotQ8_0 negative n":    DotQ8_0(q8, q8, -32),
		"DotQ4_0Q8_0 short w":   DotQ4_0Q8_0(q4[:35], q8, 64),
		"DotQ4_0Q8_0 short x":   DotQ4_0Q8_0(q4, q8[:67], 64),
		"DotQ4_KQ8_K bad n":     DotQ4_KQ8_K(q4k, q8k, 128),
		"DotQ4_KQ8_K short w":   DotQ4_KQ8_K(q4k[:143], q8k, 256),
		"DotQ6_KQ8_K short x":   DotQ6_KQ8_K(q6k, q8k[:291], 256),
		"DotQ5_KQ8_K short w":   DotQ5_KQ8_K(make([]byte, blockQ5_K-1), q8k, 256),
		"DotQ6_KQ8_K two block": DotQ6_KQ8_K(q6k, q8k, 512),
		"DotQ5_0Q8_0 short w":   DotQ5_0Q8_0(make([]byte, 2*blockQ5_0-1), q8, 64),
		"DotQ5_0Q8_0 bad n":     DotQ5_0Q8_0(make([]byte, 2*blockQ5_0), q8, 40),
		"DotIQ4_NLQ8_0 short w": DotIQ4_NLQ8_0(make([]byte, 2*blockIQ4_NL-1), q8, 64),
		"DotIQ4_NLQ8_0 bad n":   DotIQ4_NLQ8_0(make([]byte, 2*blockIQ4_NL), q8, 40),
		"DotIQ4_XSQ8_K short x": DotIQ4_XSQ8_K(make([]byte, blockIQ4_XS), q8k[:291], 256),
		"DotIQ4_XSQ8_K bad n":   DotIQ4_XSQ8_K(make([]byte, blockIQ4_XS), q8k, 128),
	} {
		if !isNaN(v) {
			t.Errorf("%s = %v, want NaN", name, v)
		}
	}
	// Longer slices are fine: only the first n values are used.
	if v := DotQ8_0(q8, q8, 32); v != 0 {
		t.Errorf("DotQ8_0 prefix = %v", v)
	}
	if v := DotRow(Q8_0, nil, nil); v != 0 {
		t.Errorf("DotRow of an empty row = %v", v)
	}
}

// The ggml generic kernels, ported literally (same temporaries, same loops),
// to pin the restructured Dot* functions to ggml's results bit for bit.

func refDotQ8_0(n int, x, y []byte) float32 {
	var sumf float32
	for ib := range n / QK {
		bx, by := x[ib*blockQ8_0:], y[ib*blockQ8_0:]
		sumi := 0
		for j := range QK {
			sumi += int(int8(bx[2+j])) * int(int8(by[2+j]))
		}
		sumf += float32(float32(sumi) * (f16At(bx) * f16At(by)))
	}
	return sumf
}

func refDotQ4_0Q8_0(n int, x, y []byte) float32 {
	var sumf float32
	for ib := range n / QK {
		bx, by := x[ib*blockQ4_0:], y[ib*blockQ8_0:]
		sumi0, sumi1 := 0, 0
		for j := range QK / 2 {
			v0 := int(bx[2+j]&0x0F) - 8
			v1 := int(bx[2+j]>>4) - 8
			sumi0 += v0 * int(int8(by[2+j]))
			sumi1 += v1 * int(int8(by[2+j+QK/2]))
		}
		sumi := sumi0 + sumi1
		sumf += float32(float32(float32(sumi)*f16At(bx)) * f16At(by))
	}
	return sumf
}

func refDotQ4_KQ8_K(n int, x, y []byte) float32 {
	const kmask1, kmask2, kmask3 = 0x3f3f3f3f, 0x0f0f0f0f, 0x03030303
	var utmp [4]uint32
	var aux8 [QKK]int8
	var aux16 [8]int16
	var sums [8]float32
	var aux32 [8]int32
	var sumf float32
	for i := range n / QKK {
		bx, by := x[i*blockQ4_K:], y[i*blockQ8_K:]
		q4 := bx[16:]
		q8 := by[4:]
		aux32 = [8]int32{}
		a := aux8[:]
		for range QKK / 64 {
			for l := range 32 {
				a[l] = int8(q4[l] & 0xF)
			}
			a = a[32:]
			for l := range 32 {
				a[l] = int8(q4[l] >> 4)
			}
			a = a[32:]
			q4 = q4[32:]
		}
		for k := range 3 {
			utmp[k] = binary.LittleEndian.Uint32(bx[4+4*k:])
		}
		utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4)
		uaux := utmp[1] & kmask1
		utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4)
		utmp[2] = uaux
		utmp[0] &= kmask1
		var sm [16]byte
		for k := range 4 {
			binary.LittleEndian.PutUint32(sm[4*k:], utmp[k])
		}
		scales, mins := sm[:8], sm[8:]
		sumi := 0
		for j := range QKK / 16 {
			sumi += int(int16(binary.LittleEndian.Uint16(by[4+QKK+2*j:]))) * int(mins[j/2])
		}
		a = aux8[:]
		is := 0
		for range QKK / 32 {
			scale := int32(scales[is])
			is++
			for range 4 {
				for l := range 8 {
					aux16[l] = int16(int8(q8[l])) * int16(a[l])
				}
				for l := range 8 {
					aux32[l] += scale * int32(aux16[l])
				}
				q8, a = q8[8:], a[8:]
			}
		}
		d := f16At(bx) * math.Float32frombits(binary.LittleEndian.Uint32(by))
		for l := range 8 {
			sums[l] += float32(d * float32(aux32[l]))
		}
		dmin := f16At(bx[2:]) * math.Float32frombits(binary.LittleEndian.Uint32(by))
		sumf -= float32(dmin * float32(sumi))
	}
	for l := range 8 {
		sumf += sums[l]
	}
	return sumf
}

// refDotQ2_KQ8_K transcribes ggml's generic ggml_vec_dot_q2_K_q8_K.
func refDotQ2_KQ8_K(n int, x, y []byte) float32 {
	var sumf float32
	for i := range n / QKK {
		bx, by := x[i*blockQ2_K:], y[i*blockQ8_K:]
		q2, q8, sc := bx[16:], by[4:], bx[:16]
		var summs int32
		for j := range 16 {
			summs += int32(int16(binary.LittleEndian.Uint16(by[4+QKK+2*j:]))) * int32(sc[j]>>4)
		}
		yd := math.Float32frombits(binary.LittleEndian.Uint32(by))
		dall, dmin := yd*f16At(bx[80:]), yd*f16At(bx[82:])
		var isum int32
		is := 0
		for range QKK / 128 {
			shift := 0
			for range 4 {
				d := int32(sc[is] & 0xf)
				is++
				var isuml int32
				for l := range 16 {
					isuml += int32(int8(q8[l])) * int32(q2[l]>>shift&3)
				}
				isum += d * isuml
				d = int32(sc[is] & 0xf)
				is++
				isuml = 0
				for l := 16; l < 32; l++ {
					isuml += int32(int8(q8[l])) * int32(q2[l]>>shift&3)
				}
				isum += d * isuml
				shift += 2
				q8 = q8[32:]
			}
			q2 = q2[32:]
		}
		sumf += float32(float32(dall*float32(isum)) - float32(dmin*float32(summs)))
	}
	return sumf
}

// refDotQ3_KQ8_K transcribes ggml's generic ggml_vec_dot_q3_K_q8_K, its
// scale unpacking with kmask1 and kmask2 included.
func refDotQ3_KQ8_K(n int, x, y []byte) float32 {
	const kmask1, kmask2 = 0x03030303, 0x0f0f0f0f
	var aux8 [QKK]int8
	var sums [8]float32
	for i := range n / QKK {
		bx, by := x[i*blockQ3_K:], y[i*blockQ8_K:]
		q3, hm, q8 := bx[32:], bx[:32], by[4:]
		var aux32 [8]int32
		a := aux8[:]
		m := byte(1)
		for range QKK / 128 {
			for shift := 0; shift < 8; shift += 2 {
				for l := range 32 {
					a[l] = int8(q3[l] >> shift & 3)
					if hm[l]&m == 0 {
						a[l] -= 4
					}
				}
				a, m = a[32:], m<<1
			}
			q3 = q3[32:]
		}
		var auxs [4]uint32
		for k := range 3 {
			auxs[k] = binary.LittleEndian.Uint32(bx[96+4*k:])
		}
		tmp := auxs[2]
		auxs[2] = ((auxs[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4)
		auxs[3] = ((auxs[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4)
		auxs[0] = (auxs[0] & kmask2) | (((tmp >> 0) & kmask1) << 4)
		auxs[1] = (auxs[1] & kmask2) | (((tmp >> 2) & kmask1) << 4)
		var scales [16]int8
		for k, v := range auxs {
			for b := range 4 {
				scales[4*k+b] = int8(v >> (8 * b))
			}
		}
		a = aux8[:]
		for j := range QKK / 16 {
			for range 2 {
				for l := range 8 {
					aux32[l] += (int32(scales[j]) - 32) * int32(int16(int8(q8[l]))*int16(a[l]))
				}
				q8, a = q8[8:], a[8:]
			}
		}
		d := f16At(bx[108:]) * math.Float32frombits(binary.LittleEndian.Uint32(by))
		for l := range 8 {
			sums[l] += float32(d * float32(aux32[l]))
		}
	}
	var sumf float32
	for _, s := range sums {
		sumf += s
	}
	return sumf
}

// refDotIQ3_SQ8_K transcribes ggml's generic ggml_vec_dot_iq3_s_q8_K.
// refDotIQ1_SQ8_K is ggml_vec_dot_iq1_s_q8_K (generic): the grid sums and
// the delta's part (from the activations' 16-value sums) apart, then
// d·dy·(sumi + sumi1/8) in float32.
func refDotIQ1_SQ8_K(n int, x, y []byte) float32 {
	var sumf float32
	for i := range n / QKK {
		bx, by := x[i*blockIQ1_S:], y[i*blockQ8_K:]
		qs, q8 := bx[2:], by[4:]
		var sumi, sumi1 int32
		for ib := range QKK / 32 {
			qh := binary.LittleEndian.Uint16(bx[2+QKK/8+2*ib:])
			ls := 2*int32(qh>>12&7) + 1
			delta := int32(1)
			if qh&0x8000 != 0 {
				delta = -1
			}
			var lsum int32
			for l := range 4 {
				g := iq1sGrid[int(qs[l])|int(qh>>(3*l)&7)<<8]
				for j := range 8 {
					lsum += int32(int8(q8[j])) * int32(int8(g>>(8*j)))
				}
				q8 = q8[8:]
			}
			bs := int32(int16(binary.LittleEndian.Uint16(by[4+QKK+4*ib:]))) + int32(int16(binary.LittleEndian.Uint16(by[4+QKK+4*ib+2:])))
			sumi += ls * lsum
			sumi1 += ls * delta * bs
			qs = qs[4:]
		}
		d := f16At(bx) * math.Float32frombits(binary.LittleEndian.Uint32(by))
		sumf += float32(d * float32(float32(sumi)+0.125*float32(sumi1)))
	}
	return sumf
}

// refDotIQ1_MQ8_K is ggml_vec_dot_iq1_m_q8_K (generic).
func refDotIQ1_MQ8_K(n int, x, y []byte) float32 {
	var sumf float32
	for i := range n / QKK {
		bx, by := x[i*blockIQ1_M:], y[i*blockQ8_K:]
		qs, qh, q8 := bx, bx[QKK/8:], by[4:]
		var sc [4]uint16
		for k := range sc {
			sc[k] = binary.LittleEndian.Uint16(bx[QKK/8+QKK/16+2*k:])
		}
		scale := F16ToF32(sc[0]>>12 | sc[1]>>8&0x00f0 | sc[2]>>4&0x0f00 | sc[3]&0xf000)
		var sumi1, sumi2 int32
		for ib := range QKK / 32 {
			var delta [4]int32
			for l, m := range []uint8{0x08, 0x80, 0x08, 0x80} {
				delta[l] = 1
				if qh[l/2]&m != 0 {
					delta[l] = -1
				}
			}
			var sum1, sum2 [2]int32
			for l := range 4 {
				g := iq1sGrid[int(qs[l])|int(uint16(qh[l/2])<<(8-4*(l%2))&0x700)]
				var lsum1, lsum2 int32
				for j := range 8 {
					lsum1 += int32(int8(q8[j])) * int32(int8(g>>(8*j)))
					lsum2 += int32(int8(q8[j]))
				}
				q8 = q8[8:]
				sum1[l/2] += lsum1
				sum2[l/2] += lsum2 * delta[l]
			}
			ls1 := 2*int32(sc[ib/2]>>(6*(ib%2))&7) + 1
			ls2 := 2*int32(sc[ib/2]>>(6*(ib%2)+3)&7) + 1
			sumi1 += sum1[0]*ls1 + sum1[1]*ls2
			sumi2 += sum2[0]*ls1 + sum2[1]*ls2
			qs, qh = qs[4:], qh[2:]
		}
		d := scale * math.Float32frombits(binary.LittleEndian.Uint32(by))
		sumf += float32(d * float32(float32(sumi1)+0.125*float32(sumi2)))
	}
	return sumf
}

func refDotIQ3_SQ8_K(n int, x, y []byte) float32 {
	var sumf float32
	for i := range n / QKK {
		bx, by := x[i*blockIQ3_S:], y[i*blockQ8_K:]
		d := f16At(bx) * math.Float32frombits(binary.LittleEndian.Uint32(by))
		qs, qh, signs, sc := bx[2:], bx[2+QKK/4:], bx[2+QKK/4+QKK/32:], bx[2+QKK/4+QKK/32+QKK/8:]
		q8 := by[4:]
		var bsum int32
		for ib32 := 0; ib32 < QKK/32; ib32 += 2 {
			ls := [2]int32{2*int32(sc[ib32/2]&0xf) + 1, 2*int32(sc[ib32/2]>>4) + 1}
			for h := range 2 {
				var sumi int32
				for l := range 4 {
					g1 := iq3sGrid[int(qs[2*l])|(int(qh[ib32+h])<<(8-2*l))&256]
					g2 := iq3sGrid[int(qs[2*l+1])|(int(qh[ib32+h])<<(7-2*l))&256]
					for j := range 4 {
						s1, s2 := int32(1), int32(1)
						if signs[l]&kmaskIQ2XS[j] != 0 {
							s1 = -1
						}
						if signs[l]&kmaskIQ2XS[j+4] != 0 {
							s2 = -1
						}
						sumi += int32(uint8(g1>>(8*j))) * int32(int8(q8[j])) * s1
						sumi += int32(uint8(g2>>(8*j))) * int32(int8(q8[j+4])) * s2
					}
					q8 = q8[8:]
				}
				qs, signs = qs[8:], signs[4:]
				bsum += sumi * ls[h]
			}
		}
		sumf += float32(d * float32(bsum))
	}
	return sumf
}

// refDotIQ2_XXSQ8_K transcribes ggml's generic ggml_vec_dot_iq2_xxs_q8_K.
func refDotIQ2_XXSQ8_K(n int, x, y []byte) float32 {
	var sumf float32
	for i := range n / QKK {
		bx, by := x[i*blockIQ2_XXS:], y[i*blockQ8_K:]
		d := f16At(bx) * math.Float32frombits(binary.LittleEndian.Uint32(by))
		q2, q8 := bx[2:], by[4:]
		var bsum int32
		for ib32 := 0; ib32 < QKK/32; ib32++ {
			aux8 := q2[:8]
			aux1 := binary.LittleEndian.Uint32(q2[4:])
			q2 = q2[8:]
			ls := int32(2*(aux1>>28) + 1)
			var sumi int32
			for l := range 4 {
				grid := iq2xxsGrid[aux8[l]]
				signs := ksignsIQ2XS[(aux1>>(7*l))&127]
				for j := range 8 {
					s := int32(1)
					if signs&kmaskIQ2XS[j] != 0 {
						s = -1
					}
					sumi += int32(uint8(grid>>(8*j))) * int32(int8(q8[j])) * s
				}
				q8 = q8[8:]
			}
			bsum += sumi * ls
		}
		sumf += float32(d * float32(bsum))
	}
	return 0.125 * sumf
}

// refDotIQ2_XSQ8_K transcribes ggml's generic ggml_vec_dot_iq2_xs_q8_K.
func refDotIQ2_XSQ8_K(n int, x, y []byte) float32 {
	var sumf float32
	for i := range n / QKK {
		bx, by := x[i*blockIQ2_XS:], y[i*blockQ8_K:]
		d := f16At(bx) * math.Float32frombits(binary.LittleEndian.Uint32(by))
		q2, sc, q8 := bx[2:], bx[2+QKK/4:], by[4:]
		var bsum int32
		for ib32 := 0; ib32 < QKK/32; ib32++ {
			ls1, ls2 := int32(2*(sc[ib32]&0xf)+1), int32(2*(sc[ib32]>>4)+1)
			for h, ls := range []int32{ls1, ls2} {
				var sumi int32
				for l := 2 * h; l < 2*h+2; l++ {
					q := binary.LittleEndian.Uint16(q2[2*l:])
					grid := iq2xsGrid[q&511]
					signs := ksignsIQ2XS[q>>9]
					for j := range 8 {
						s := int32(1)
						if signs&kmaskIQ2XS[j] != 0 {
							s = -1
						}
						sumi += int32(uint8(grid>>(8*j))) * int32(int8(q8[j])) * s
					}
					q8 = q8[8:]
				}
				bsum += sumi * ls
			}
			q2 = q2[8:]
		}
		sumf += float32(d * float32(bsum))
	}
	return 0.125 * sumf
}

// refDotIQ2_SQ8_K transcribes ggml's generic ggml_vec_dot_iq2_s_q8_K.
func refDotIQ2_SQ8_K(n int, x, y []byte) float32 {
	var sumf float32
	for i := range n / QKK {
		bx, by := x[i*blockIQ2_S:], y[i*blockQ8_K:]
		d := f16At(bx) * math.Float32frombits(binary.LittleEndian.Uint32(by))
		qs, qh, scales, q8 := bx[2:], bx[2+QKK/4:], bx[2+QKK/4+QKK/32:], by[4:]
		signs := qs[QKK/8:]
		var bsum int32
		for ib32 := 0; ib32 < QKK/32; ib32++ {
			ls1, ls2 := int32(1+2*(scales[ib32]&0xf)), int32(1+2*(scales[ib32]>>4))
			var sumi1, sumi2 int32
			for l := range 4 {
				grid := iq2sGrid[int(qs[l])|(int(qh[ib32])<<(8-2*l))&0x300]
				for j := range 8 {
					s := int32(1)
					if signs[l]&kmaskIQ2XS[j] != 0 {
						s = -1
					}
					if l < 2 {
						sumi1 += int32(int8(q8[j])) * int32(uint8(grid>>(8*j))) * s
					} else {
						sumi2 += int32(int8(q8[j])) * int32(uint8(grid>>(8*j))) * s
					}
				}
				q8 = q8[8:]
			}
			bsum += ls1*sumi1 + ls2*sumi2
			qs, signs = qs[4:], signs[4:]
		}
		sumf += float32(d * float32(bsum))
	}
	return 0.125 * sumf
}

// refDotIQ3_XXSQ8_K transcribes ggml's generic ggml_vec_dot_iq3_xxs_q8_K.
func refDotIQ3_XXSQ8_K(n int, x, y []byte) float32 {
	var sumf float32
	for i := range n / QKK {
		bx, by := x[i*blockIQ3_XXS:], y[i*blockQ8_K:]
		d := f16At(bx) * math.Float32frombits(binary.LittleEndian.Uint32(by))
		q3, gas, q8 := bx[2:], bx[2+QKK/4:], by[4:]
		var bsum int32
		for ib32 := 0; ib32 < QKK/32; ib32++ {
			aux32 := binary.LittleEndian.Uint32(gas)
			gas = gas[4:]
			ls := int32(2*(aux32>>28) + 1)
			var sumi int32
			for l := range 4 {
				grid1, grid2 := iq3xxsGrid[q3[2*l]], iq3xxsGrid[q3[2*l+1]]
				signs := ksignsIQ2XS[(aux32>>(7*l))&127]
				for j := range 4 {
					s1, s2 := int32(1), int32(1)
					if signs&kmaskIQ2XS[j] != 0 {
						s1 = -1
					}
					if signs&kmaskIQ2XS[j+4] != 0 {
						s2 = -1
					}
					sumi += int32(uint8(grid1>>(8*j))) * int32(int8(q8[j])) * s1
					sumi += int32(uint8(grid2>>(8*j))) * int32(int8(q8[j+4])) * s2
				}
				q8 = q8[8:]
			}
			q3 = q3[8:]
			bsum += sumi * ls
		}
		sumf += float32(d * float32(bsum))
	}
	return 0.25 * sumf
}

// refDotQ5_0Q8_0 transcribes ggml's ggml_vec_dot_q5_0_q8_0 (its scalar
// loop), high bits extracted as ggml shifts them.
func refDotQ5_0Q8_0(n int, x, y []byte) float32 {
	var sumf float32
	for ib := range n / QK {
		bx, by := x[ib*blockQ5_0:], y[ib*blockQ8_0:]
		qh := binary.LittleEndian.Uint32(bx[2:])
		var sumi0, sumi1 int32
		for j := range QK / 2 {
			xh0 := byte((qh&(1<<j))>>j) << 4
			xh1 := byte((qh & (1 << (j + 16))) >> (j + 12))
			x0 := int32(int8((bx[6+j]&0x0f | xh0) - 16))
			x1 := int32(int8((bx[6+j]>>4 | xh1) - 16))
			sumi0 += x0 * int32(int8(by[2+j]))
			sumi1 += x1 * int32(int8(by[2+j+QK/2]))
		}
		sumf += float32(float32(f16At(bx)*f16At(by)) * float32(sumi0+sumi1))
	}
	return sumf
}

// refDotIQ4_NLQ8_0 transcribes ggml's ggml_vec_dot_iq4_nl_q8_0 (its
// scalar loop).
func refDotIQ4_NLQ8_0(n int, x, y []byte) float32 {
	var sumf float32
	for ib := range n / QK {
		bx, by := x[ib*blockIQ4_NL:], y[ib*blockQ8_0:]
		d := f16At(by) * f16At(bx)
		var sumi1, sumi2 int32
		for j := range QK / 2 {
			sumi1 += int32(int8(by[2+j])) * int32(IQ4NLValues[bx[2+j]&0xf])
			sumi2 += int32(int8(by[2+j+QK/2])) * int32(IQ4NLValues[bx[2+j]>>4])
		}
		sumf += float32(d * float32(sumi1+sumi2))
	}
	return sumf
}

// refDotIQ4_XSQ8_K transcribes ggml's generic ggml_vec_dot_iq4_xs_q8_K:
// the scales unpacked two at a time from a shifting scales_h.
func refDotIQ4_XSQ8_K(n int, x, y []byte) float32 {
	var sumf float32
	for ibl := range n / QKK {
		bx, by := x[ibl*blockIQ4_XS:], y[ibl*blockQ8_K:]
		d4d8 := f16At(bx) * math.Float32frombits(binary.LittleEndian.Uint32(by))
		h := binary.LittleEndian.Uint16(bx[2:])
		qs, q8 := bx[8:], by[4:]
		for ib := 0; ib < QKK/32; ib += 2 {
			ls1 := bx[4+ib/2]&0xf | byte(h<<4&0x30)
			ls2 := bx[4+ib/2]>>4 | byte(h<<2&0x30)
			h >>= 4
			d1 := d4d8 * float32(int(ls1)-32)
			d2 := d4d8 * float32(int(ls2)-32)
			for _, dl := range []float32{d1, d2} {
				var sumi1, sumi2 int32
				for j := range 16 {
					sumi1 += int32(int8(q8[j])) * int32(IQ4NLValues[qs[j]&0xf])
					sumi2 += int32(int8(q8[j+16])) * int32(IQ4NLValues[qs[j]>>4])
				}
				sumf += float32(dl * float32(sumi1+sumi2))
				qs, q8 = qs[16:], q8[32:]
			}
		}
	}
	return sumf
}

// refDotQ5_KQ8_K transcribes ggml's generic ggml_vec_dot_q5_K_q8_K: the
// values with their fifth bit unpacked to int8, then refDotQ4_KQ8_K's sums.
func refDotQ5_KQ8_K(n int, x, y []byte) float32 {
	const kmask1, kmask2, kmask3 = 0x3f3f3f3f, 0x0f0f0f0f, 0x03030303
	var utmp [4]uint32
	var aux8 [QKK]int8
	var aux16 [8]int16
	var sums [8]float32
	var aux32 [8]int32
	var sumf float32
	for i := range n / QKK {
		bx, by := x[i*blockQ5_K:], y[i*blockQ8_K:]
		q4, hm := bx[48:], bx[16:48]
		q8 := by[4:]
		aux32 = [8]int32{}
		a := aux8[:]
		m := byte(1)
		for range QKK / 64 {
			for l := range 32 {
				a[l] = int8(q4[l] & 0xF)
				if hm[l]&m != 0 {
					a[l] += 16
				}
			}
			a, m = a[32:], m<<1
			for l := range 32 {
				a[l] = int8(q4[l] >> 4)
				if hm[l]&m != 0 {
					a[l] += 16
				}
			}
			a, m = a[32:], m<<1
			q4 = q4[32:]
		}
		for k := range 3 {
			utmp[k] = binary.LittleEndian.Uint32(bx[4+4*k:])
		}
		utmp[3] = ((utmp[2] >> 4) & kmask2) | (((utmp[1] >> 6) & kmask3) << 4)
		uaux := utmp[1] & kmask1
		utmp[1] = (utmp[2] & kmask2) | (((utmp[0] >> 6) & kmask3) << 4)
		utmp[2] = uaux
		utmp[0] &= kmask1
		var sm [16]byte
		for k := range 4 {
			binary.LittleEndian.PutUint32(sm[4*k:], utmp[k])
		}
		scales, mins := sm[:8], sm[8:]
		sumi := 0
		for j := range QKK / 16 {
			sumi += int(int16(binary.LittleEndian.Uint16(by[4+QKK+2*j:]))) * int(mins[j/2])
		}
		a = aux8[:]
		for is := range QKK / 32 {
			scale := int32(scales[is])
			for range 4 {
				for l := range 8 {
					aux16[l] = int16(int8(q8[l])) * int16(a[l])
				}
				for l := range 8 {
					aux32[l] += scale * int32(aux16[l])
				}
				q8, a = q8[8:], a[8:]
			}
		}
		dy := math.Float32frombits(binary.LittleEndian.Uint32(by))
		d := f16At(bx) * dy
		for l := range 8 {
			sums[l] += float32(d * float32(aux32[l]))
		}
		dmin := f16At(bx[2:]) * dy
		sumf -= float32(dmin * float32(sumi))
	}
	for l := range 8 {
		sumf += sums[l]
	}
	return sumf
}

func refDotQ6_KQ8_K(n int, x, y []byte) float32 {
	var aux8 [QKK]int8
	var aux16 [8]int16
	var sums [8]float32
	var aux32 [8]int32
	for i := range n / QKK {
		bx, by := x[i*blockQ6_K:], y[i*blockQ8_K:]
		q4, qh := bx[:128], bx[128:192]
		q8 := by[4:]
		aux32 = [8]int32{}
		a := aux8[:]
		for j := 0; j < QKK; j += 128 {
			for l := range 32 {
				a[l+0] = int8(q4[l+0]&0xF|((qh[l]>>0)&3)<<4) - 32
				a[l+32] = int8(q4[l+32]&0xF|((qh[l]>>2)&3)<<4) - 32
				a[l+64] = int8(q4[l+0]>>4|((qh[l]>>4)&3)<<4) - 32
				a[l+96] = int8(q4[l+32]>>4|((qh[l]>>6)&3)<<4) - 32
			}
			a, q4, qh = a[128:], q4[64:], qh[32:]
		}
		a = aux8[:]
		is := 0
		for range QKK / 16 {
			scale := int32(int8(bx[192+is]))
			is++
			for range 2 {
				for l := range 8 {
					aux16[l] = int16(int8(q8[l])) * int16(a[l])
				}
				for l := range 8 {
					aux32[l] += scale * int32(aux16[l])
				}
				q8, a = q8[8:], a[8:]
			}
		}
		d := f16At(bx[208:]) * math.Float32frombits(binary.LittleEndian.Uint32(by))
		for l := range 8 {
			sums[l] += float32(d * float32(aux32[l]))
		}
	}
	var sumf float32
	for l := range 8 {
		sumf += sums[l]
	}
	return sumf
}

// checkIntDot compares an int8-path dot product against ggml's literal
// kernel (bit for bit) and against the float64 dot of the dequantized weights
// and activations. ggml rounds each block's scale product, the block's float
// term and the running sum to float32, so the two differ by at most a few
// float32 roundings per block of the terms' magnitudes; mag is that sum of
// magnitudes.
func checkIntDot(t *testing.T, name string, got, ref float32, want, mag float64, nb int) {
	t.Helper()
	if math.Float32bits(got) != math.Float32bits(ref) {
		t.Errorf("%s = %v, ggml's kernel gives %v", name, got, ref)
	}
	if d := math.Abs(float64(got) - want); d > float64(nb+4)*0x1p-23*mag {
		t.Errorf("%s = %v, dequantized dot %v: difference %g exceeds float rounding of magnitude %g", name, got, want, d, mag)
	}
}

func TestDotInt8(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, n := range []int{QKK, 3 * QKK, 16 * QKK} {
		x := randomFloats(r, n)
		xq8 := quantize(t, Q8_0, x)
		xk := quantize(t, Q8_K, x)
		x8v := dequant(t, Q8_0, xq8, n)
		xkv := dequant(t, Q8_K, xk, n)
		dot := func(w, a []float32) (sum, mag float64) {
			for i := range w {
				p := float64(w[i]) * float64(a[i])
				sum += p
				mag += math.Abs(p)
			}
			return
		}

		w := quantize(t, Q8_0, randomFloats(r, n))
		want, mag := dot(dequant(t, Q8_0, w, n), x8v)
		checkIntDot(t, "DotQ8_0", DotQ8_0(w, xq8, n), refDotQ8_0(n, w, xq8), want, mag, n/QK)

		w = randomRow(r, Q4_0, n)
		want, mag = dot(dequant(t, Q4_0, w, n), x8v)
		checkIntDot(t, "DotQ4_0Q8_0", DotQ4_0Q8_0(w, xq8, n), refDotQ4_0Q8_0(n, w, xq8), want, mag, n/QK)

		// For Q4_K the kernel splits each value into d*sc*q and dmin*m, and
		// the two parts can cancel, so the magnitude is that of the parts.
		w = randomRow(r, Q4_K, n)
		wv := dequant(t, Q4_K, w, n)
		want, _ = dot(wv, xkv)
		mag = 0
		for i := range wv {
			blk := w[i/QKK*blockQ4_K:]
			sc, m := scaleMinK4(i%QKK/32, blk[4:16])
			mag += (math.Abs(float64(f16At(blk)*float32(sc)))*15 + math.Abs(float64(f16At(blk[2:])*float32(m)))) * math.Abs(float64(xkv[i]))
		}
		checkIntDot(t, "DotQ4_KQ8_K", DotQ4_KQ8_K(w, xk, n), refDotQ4_KQ8_K(n, w, xk), want, mag, n/QKK*8)

		w = randomRow(r, Q5_K, n)
		wv = dequant(t, Q5_K, w, n)
		want, _ = dot(wv, xkv)
		mag = 0
		for i := range wv {
			blk := w[i/QKK*blockQ5_K:]
			sc, m := scaleMinK4(i%QKK/32, blk[4:16])
			mag += (math.Abs(float64(f16At(blk)*float32(sc)))*31 + math.Abs(float64(f16At(blk[2:])*float32(m)))) * math.Abs(float64(xkv[i]))
		}
		checkIntDot(t, "DotQ5_KQ8_K", DotQ5_KQ8_K(w, xk, n), refDotQ5_KQ8_K(n, w, xk), want, mag, n/QKK*8)

		w = randomRow(r, Q6_K, n)
		want, mag = dot(dequant(t, Q6_K, w, n), xkv)
		checkIntDot(t, "DotQ6_KQ8_K", DotQ6_KQ8_K(w, xk, n), refDotQ6_KQ8_K(n, w, xk), want, mag, n/QKK*8)

		// Q2_K's mins, like Q4_K's, make a magnitude of the parts.
		w = randomRow(r, Q2_K, n)
		wv = dequant(t, Q2_K, w, n)
		want, _ = dot(wv, xkv)
		mag = 0
		for i := range wv {
			blk := w[i/QKK*blockQ2_K:]
			sc := blk[i%QKK/16]
			mag += (math.Abs(float64(f16At(blk[80:])*float32(sc&0xf)))*3 + math.Abs(float64(f16At(blk[82:])*float32(sc>>4)))) * math.Abs(float64(xkv[i]))
		}
		checkIntDot(t, "DotQ2_KQ8_K", DotQ2_KQ8_K(w, xk, n), refDotQ2_KQ8_K(n, w, xk), want, mag, n/QKK*2)

		w = randomRow(r, Q3_K, n)
		want, mag = dot(dequant(t, Q3_K, w, n), xkv)
		checkIntDot(t, "DotQ3_KQ8_K", DotQ3_KQ8_K(w, xk, n), refDotQ3_KQ8_K(n, w, xk), want, mag, n/QKK*8)

		w = randomRow(r, IQ3_S, n)
		want, mag = dot(dequant(t, IQ3_S, w, n), xkv)
		checkIntDot(t, "DotIQ3_SQ8_K", DotIQ3_SQ8_K(w, xk, n), refDotIQ3_SQ8_K(n, w, xk), want, mag, n/QKK)

		w = randomRow(r, IQ2_XXS, n)
		want, mag = dot(dequant(t, IQ2_XXS, w, n), xkv)
		checkIntDot(t, "DotIQ2_XXSQ8_K", DotIQ2_XXSQ8_K(w, xk, n), refDotIQ2_XXSQ8_K(n, w, xk), want, mag, n/QKK)

		w = randomRow(r, IQ2_XS, n)
		want, mag = dot(dequant(t, IQ2_XS, w, n), xkv)
		checkIntDot(t, "DotIQ2_XSQ8_K", DotIQ2_XSQ8_K(w, xk, n), refDotIQ2_XSQ8_K(n, w, xk), want, mag, n/QKK)

		w = randomRow(r, IQ2_S, n)
		want, mag = dot(dequant(t, IQ2_S, w, n), xkv)
		checkIntDot(t, "DotIQ2_SQ8_K", DotIQ2_SQ8_K(w, xk, n), refDotIQ2_SQ8_K(n, w, xk), want, mag, n/QKK)

		w = randomRow(r, IQ3_XXS, n)
		want, mag = dot(dequant(t, IQ3_XXS, w, n), xkv)
		checkIntDot(t, "DotIQ3_XXSQ8_K", DotIQ3_XXSQ8_K(w, xk, n), refDotIQ3_XXSQ8_K(n, w, xk), want, mag, n/QKK)

		w = randomRow(r, IQ1_S, n)
		want, mag = dot(dequant(t, IQ1_S, w, n), xkv)
		checkIntDot(t, "DotIQ1_SQ8_K", DotIQ1_SQ8_K(w, xk, n), refDotIQ1_SQ8_K(n, w, xk), want, mag, n/QKK)

		w = randomRow(r, IQ1_M, n)
		want, mag = dot(dequant(t, IQ1_M, w, n), xkv)
		checkIntDot(t, "DotIQ1_MQ8_K", DotIQ1_MQ8_K(w, xk, n), refDotIQ1_MQ8_K(n, w, xk), want, mag, n/QKK)

		w = randomRow(r, Q5_0, n)
		want, mag = dot(dequant(t, Q5_0, w, n), x8v)
		checkIntDot(t, "DotQ5_0Q8_0", DotQ5_0Q8_0(w, xq8, n), refDotQ5_0Q8_0(n, w, xq8), want, mag, n/QK)

		w = randomRow(r, IQ4_NL, n)
		want, mag = dot(dequant(t, IQ4_NL, w, n), x8v)
		checkIntDot(t, "DotIQ4_NLQ8_0", DotIQ4_NLQ8_0(w, xq8, n), refDotIQ4_NLQ8_0(n, w, xq8), want, mag, n/QK)

		w = randomRow(r, IQ4_XS, n)
		want, mag = dot(dequant(t, IQ4_XS, w, n), xkv)
		checkIntDot(t, "DotIQ4_XSQ8_K", DotIQ4_XSQ8_K(w, xk, n), refDotIQ4_XSQ8_K(n, w, xk), want, mag, n/QKK*8)
	}
}

func TestNoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	const n = 4 * QKK
	x := randomFloats(r, n)
	y := make([]float32, n)
	xq8 := quantize(t, Q8_0, x)
	xk := quantize(t, Q8_K, x)
	for _, typ := range allDequantTypes {
		w := randomRow(r, typ, n)
		if a := testing.AllocsPerRun(10, func() { DotRow(typ, w, x) }); a != 0 {
			t.Errorf("DotRow(%v) allocates %v times", typ, a)
		}
		if a := testing.AllocsPerRun(10, func() { _ = DequantizeRow(typ, y, w) }); a != 0 {
			t.Errorf("DequantizeRow(%v) allocates %v times", typ, a)
		}
		if CanQuantize(typ) {
			if a := testing.AllocsPerRun(10, func() { _ = QuantizeRow(typ, w, x) }); a != 0 {
				t.Errorf("QuantizeRow(%v) allocates %v times", typ, a)
			}
		}
	}
	w8, w4 := randomRow(r, Q8_0, n), randomRow(r, Q4_0, n)
	w4k, w6k := randomRow(r, Q4_K, n), randomRow(r, Q6_K, n)
	wnl, wxs, w50 := randomRow(r, IQ4_NL, n), randomRow(r, IQ4_XS, n), randomRow(r, Q5_0, n)
	for name, f := range map[string]func(){
		"DotQ8_0":     func() { DotQ8_0(w8, xq8, n) },
		"DotQ4_0Q8_0": func() { DotQ4_0Q8_0(w4, xq8, n) },
		"DotQ4_KQ8_K": func() { DotQ4_KQ8_K(w4k, xk, n) },
		"DotQ6_KQ8_K": func() { DotQ6_KQ8_K(w6k, xk, n) },
		"DotIQ4_NL":   func() { DotIQ4_NLQ8_0(wnl, xq8, n) },
		"DotQ5_0Q8_0": func() { DotQ5_0Q8_0(w50, xq8, n) },
		"DotIQ4_XS":   func() { DotIQ4_XSQ8_K(wxs, xk, n) },
	} {
		if a := testing.AllocsPerRun(10, f); a != 0 {
			t.Errorf("%s allocates %v times", name, a)
		}
	}
}

// Q4_1 and Q5_1 against Q8_0 activations equal the dequantized dot within
// float rounding of their parts (the values and the offsets, which can
// cancel), on rows from the quantizer and on random bytes.
func TestDotOffset(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 20))
	for _, c := range []struct {
		typ  Type
		dot  func(w, xq []byte, n int) float32
		qmax float64
	}{{Q4_1, DotQ4_1Q8_0, 15}, {Q5_1, DotQ5_1Q8_0, 31}} {
		for _, n := range []int{QK, 7 * QK, 64 * QK} {
			xq8 := quantize(t, Q8_0, randomFloats(r, n))
			xv := dequant(t, Q8_0, xq8, n)
			for _, w := range [][]byte{quantize(t, c.typ, randomFloats(r, n)), randomRow(r, c.typ, n)} {
				wv := dequant(t, c.typ, w, n)
				var want, mag float64
				bs := c.typ.TypeSize()
				for i := range wv {
					want += float64(wv[i]) * float64(xv[i])
					blk := w[i/QK*bs:]
					mag += (math.Abs(float64(f16At(blk)))*c.qmax + math.Abs(float64(f16At(blk[2:])))) * math.Abs(float64(xv[i]))
				}
				got := c.dot(w, xq8, n)
				if d := math.Abs(float64(got) - want); !(d <= float64(2*n/QK+4)*0x1p-23*mag) {
					t.Errorf("%v n=%d: %v, dequantized dot %v (difference %g, magnitude %g)", c.typ, n, got, want, d, mag)
				}
			}
		}
		if v := c.dot(make([]byte, c.typ.TypeSize()-1), make([]byte, blockQ8_0), QK); v == v {
			t.Errorf("%v: a short row gives %v, want NaN", c.typ, v)
		}
	}
}
