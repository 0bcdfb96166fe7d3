package quant

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// testRow makes n values whose 32-value blocks exercise the quantizers' corner
// cases: Gaussian blocks at scales from 1e-6 to 1e3 (the small ones give f16
// subnormal scales; larger ones would overflow Q4_1's f16 scale, a limit of
// the format), all-zero and constant blocks, a lone outlier, blocks
// whose largest magnitude is negative or positive, and exact ties.
func testRow(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for b := 0; b < n; b += QK {
		blk := x[b : b+QK]
		scale := float32(math.Pow(10, float64(r.IntN(10))-6))
		switch r.IntN(8) {
		case 0: // all zero
		case 1: // constant
			for i := range blk {
				blk[i] = -scale
			}
		case 2: // one outlier
			blk[r.IntN(QK)] = 100 * scale
			for i := range blk {
				if blk[i] == 0 {
					blk[i] = float32(r.NormFloat64()) * scale / 100
				}
			}
		case 3: // non-negative
			for i := range blk {
				blk[i] = absf(float32(r.NormFloat64()) * scale)
			}
		case 4: // small integers: many exact halves after scaling
			for i := range blk {
				blk[i] = float32(r.IntN(17) - 8)
			}
		default:
			for i := range blk {
				blk[i] = float32(r.NormFloat64()) * scale
			}
		}
	}
	return x
}

// f16HalfULP bounds |d - f16(d)| given the stored f16 value: half an f16 ulp
// (2^-11 relative for normals, 2^-25 absolute for subnormals).
func f16HalfULP(d float32) float64 {
	a := math.Abs(float64(d))
	if a < 1.0/(1<<14) {
		return 1.0 / (1 << 25)
	}
	_, e := math.Frexp(a) // a = m*2^e, m in [0.5, 1)
	return math.Ldexp(1, e-12)
}

// blockBound returns the largest error quantizing block x to typ may make,
// derived from the reference algorithm (see each case), given the block's
// stored scale d16 and (for Q4_1 and Q5_1) min m16.
func blockBound(typ Type, x []float32, d16, m16 float32) float64 {
	var amax, lo, hi float64
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, v := range x {
		amax = math.Max(amax, math.Abs(float64(v)))
		lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
	}
	eps := 1e-6 * math.Max(amax, hi-lo) // float32 rounding of scale and products
	dErr := f16HalfULP(d16)
	switch typ {
	case Q8_0, Q8_1:
		// q = round(x/d), d = amax/127: |x - q*d| <= d/2; storing d as f16
		// moves each value by at most |q| <= 127 times d's rounding.
		return amax/127/2 + 127*dErr + eps
	case Q4_0:
		// q = floor(x/d + 8.5) clamped to 15, d = -max/8: rounding costs d/2,
		// but the values just below -max clamp to 7 and cost up to d.
		return amax/8 + 8*dErr + eps
	case Q5_0:
		return amax/16 + 16*dErr + eps
	case Q4_1:
		// q = round((x-min)/d), d = (max-min)/15, plus f16 rounding of d (up
		// to 15 times) and of min.
		return (hi-lo)/15/2 + 15*dErr + f16HalfULP(m16) + eps
	case Q5_1:
		return (hi-lo)/31/2 + 31*dErr + f16HalfULP(m16) + eps
	}
	panic("no bound for " + typ.String())
}

func quantize(t *testing.T, typ Type, x []float32) []byte {
	t.Helper()
	size, err := typ.RowSize(len(x))
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, size)
	if err := QuantizeRow(typ, b, x); err != nil {
		t.Fatalf("QuantizeRow(%v): %v", typ, err)
	}
	return b
}

func TestQuantizeRoundTripBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, typ := range []Type{Q8_0, Q8_1, Q4_0, Q4_1, Q5_0, Q5_1} {
		for _, n := range []int{QK, 3 * QK, 17 * QK, 3 * QKK} {
			x := testRow(r, n)
			b := quantize(t, typ, x)
			y := dequant(t, typ, b, n)
			ts := typ.TypeSize()
			for blk := 0; blk < n/QK; blk++ {
				raw := b[blk*ts:]
				d16, m16 := f16At(raw), f16At(raw[2:])
				xs, ys := x[blk*QK:(blk+1)*QK], y[blk*QK:(blk+1)*QK]
				bound := blockBound(typ, xs, d16, m16)
				for i := range xs {
					if e := math.Abs(float64(ys[i] - xs[i])); e > bound {
						t.Fatalf("%v n=%d block %d value %d: %v -> %v, error %g > bound %g", typ, n, blk, i, xs[i], ys[i], e, bound)
					}
				}
			}
		}
	}
}

func TestQuantizeQ8_K(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{QKK, 3 * QKK} {
		x := testRow(r, n)
		b := quantize(t, Q8_K, x)
		y := dequant(t, Q8_K, b, n)
		for blk := 0; blk < n/QKK; blk++ {
			raw := b[blk*blockQ8_K : (blk+1)*blockQ8_K]
			xs, ys := x[blk*QKK:(blk+1)*QKK], y[blk*QKK:(blk+1)*QKK]
			var amax, vmax float32
			for _, v := range xs {
				if absf(v) > amax {
					amax, vmax = absf(v), v
				}
			}
			d := math.Float32frombits(binary.LittleEndian.Uint32(raw))
			// d = 1/(-127/max): negative when the largest magnitude is positive.
			if want := 1 / (-127 / vmax); amax != 0 && d != want {
				t.Fatalf("block %d: d = %v, want %v", blk, d, want)
			}
			bound := float64(amax)/127/2*(1+1e-5) + 1e-30
			for i := range xs {
				if e := math.Abs(float64(ys[i] - xs[i])); e > bound {
					t.Fatalf("n=%d block %d value %d: %v -> %v, error %g > %g", n, blk, i, xs[i], ys[i], e, bound)
				}
			}
			for j := range QKK / 16 {
				sum := 0
				for _, q := range raw[4+16*j : 4+16*j+16] {
					sum += int(int8(q))
				}
				if got := int16(binary.LittleEndian.Uint16(raw[4+QKK+2*j:])); int(got) != sum {
					t.Fatalf("block %d bsums[%d] = %d, want %d", blk, j, got, sum)
				}
			}
		}
	}
	// An all-zero block is all zero bytes, block sums included.
	b := quantize(t, Q8_K, make([]float32, QKK))
	for i, v := range b {
		if v != 0 {
			t.Fatalf("zero block byte %d = %#x", i, v)
		}
	}
}

// TestQuantizeKRoundTrip checks the k- and i-quants statistically: their
// reference quantizers search for good scales rather than rounding against
// a fixed one, so there is no tight per-value bound, but the error relative
// to the signal must stay near what each bit width allows (measured on
// Gaussian data: about 0.29 for Q2_K, 0.15 for Q3_K, 0.071 for Q4_K, 0.036
// for Q5_K, 0.018 for Q6_K, 0.079 for IQ4_NL and 0.075 for IQ4_XS).
func TestQuantizeKRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct {
		typ     Type
		maxRMSE float64
	}{{Q2_K, 0.32}, {Q3_K, 0.17}, {Q4_K, 0.08}, {Q5_K, 0.04}, {Q6_K, 0.02}, {IQ4_NL, 0.09}, {IQ4_XS, 0.08}} {
		n := 64 * QKK
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64()) * float32(1+i/QKK)
		}
		y := dequant(t, c.typ, quantize(t, c.typ, x), n)
		var se, sx float64
		for i := range x {
			e := float64(y[i] - x[i])
			se += e * e
			sx += float64(x[i]) * float64(x[i])
		}
		if rmse := math.Sqrt(se / sx); rmse > c.maxRMSE {
			t.Errorf("%v relative RMS error %.4f > %.4f", c.typ, rmse, c.maxRMSE)
		}
		// Corner-case rows must round-trip to finite values near the input.
		for _, m := range []int{1, 3} {
			x := testRow(r, m*QKK)
			y := dequant(t, c.typ, quantize(t, c.typ, x), m*QKK)
			for blk := 0; blk < m; blk++ {
				var amax float64
				for _, v := range x[blk*QKK : (blk+1)*QKK] {
					amax = math.Max(amax, math.Abs(float64(v)))
				}
				for i := blk * QKK; i < (blk+1)*QKK; i++ {
					if e := math.Abs(float64(y[i] - x[i])); !(e <= amax/4+1e-30) {
						t.Fatalf("%v value %d: %v -> %v (block amax %g)", c.typ, i, x[i], y[i], amax)
					}
				}
			}
		}
	}
}

// TestQuantizeKZero: all-zero input must give an all-zero block's values.
func TestQuantizeKZero(t *testing.T) {
	for _, typ := range []Type{Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS} {
		y := dequant(t, typ, quantize(t, typ, make([]float32, QKK)), QKK)
		for i, v := range y {
			if v != 0 {
				t.Fatalf("%v zero row value %d = %v", typ, i, v)
			}
		}
	}
}

func TestQuantizeKnown(t *testing.T) {
	// Q8_0: the largest magnitude maps to ±127 exactly; d is amax/127 as f16.
	x := make([]float32, QK)
	for i := range x {
		x[i] = float32(i - 16)
	}
	b := quantize(t, Q8_0, x)
	if got, want := binary.LittleEndian.Uint16(b), F32ToF16(16.0/127); got != want {
		t.Errorf("Q8_0 d = %#04x, want %#04x", got, want)
	}
	for i, v := range x {
		want := int8(math.Round(float64(v * (1 / float32(16.0/127)))))
		if got := int8(b[2+i]); got != want {
			t.Errorf("Q8_0 q[%d] = %d, want %d", i, got, want)
		}
	}
	if int8(b[2]) != -127 {
		t.Errorf("Q8_0 q[0] = %d, want -127", int8(b[2]))
	}

	// Q4_0: d = max/-8 with max the signed value of largest magnitude. A
	// negative max gives d > 0 and maps to quant 0 (-8); the opposite extreme
	// +4 would be +8 and clamps to 7.
	for i := range x {
		x[i] = 0
	}
	x[0], x[1], x[17] = -4, 4, 1
	b = quantize(t, Q4_0, x)
	if got := F16ToF32(binary.LittleEndian.Uint16(b)); got != 0.5 {
		t.Errorf("Q4_0 d = %v, want 0.5", got)
	}
	if b[2] != 0x80 || b[3] != 0xaf || b[4] != 0x88 {
		t.Errorf("Q4_0 qs = % x, want 80 af 88 ...", b[2:5])
	}
	y := dequant(t, Q4_0, b, QK)
	if y[0] != -4 || y[1] != 3.5 || y[17] != 1 || y[2] != 0 {
		t.Errorf("Q4_0 values %v", y[:18])
	}
	// A positive max flips the sign of d and is then exact.
	x[0] = 3
	b = quantize(t, Q4_0, x)
	if got := F16ToF32(binary.LittleEndian.Uint16(b)); got != -0.5 {
		t.Errorf("Q4_0 d = %v, want -0.5", got)
	}
	if y := dequant(t, Q4_0, b, QK); y[1] != 4 || y[0] != 3 {
		t.Errorf("Q4_0 values %v", y[:2])
	}

	// Plain types are conversions.
	x = []float32{1, -2.5, 1 + 1.0/2048, float32(math.Inf(1)), 1e-8, 65520}
	for _, typ := range []Type{F32, F16, BF16} {
		b := quantize(t, typ, x)
		for i, v := range x {
			var want float32
			switch typ {
			case F32:
				want = v
			case F16:
				want = F16ToF32(F32ToF16(v))
			case BF16:
				want = BF16ToF32(F32ToBF16(v))
			}
			if got := dequant(t, typ, b, len(x))[i]; got != want {
				t.Errorf("%v value %d: %v, want %v", typ, i, got, want)
			}
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	for _, c := range []struct {
		typ     Type
		n, size int
		want    string
	}{
		{Q8_0, 31, 34, "not a multiple"},
		{Q8_0, 32, 35, "32 values need 34 bytes, have 35"},
		{Q4_0, 64, 18, "64 values need 36 bytes, have 18"},
		{Q8_K, 256, 291, "Q8_K"},
		{Q4_K, 128, 144, "Q4_K"},
	} {
		dst := make([]byte, c.size)
		for i := range dst {
			dst[i] = 0xaa
		}
		err := QuantizeRow(c.typ, dst, make([]float32, c.n))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("QuantizeRow(%v, %d values, %d bytes) = %v, want an error containing %q", c.typ, c.n, c.size, err, c.want)
		}
		for _, v := range dst {
			if v != 0xaa {
				t.Errorf("QuantizeRow(%v) wrote dst despite failing", c.typ)
				break
			}
		}
	}
	for _, typ := range []Type{I8, F64, Type(77)} {
		err := QuantizeRow(typ, nil, nil)
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), typ.String()) {
			t.Errorf("QuantizeRow(%v) = %v, want ErrUnsupported naming the type", typ, err)
		}
	}
}
