package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// ggmlFP32ToFP16 is ggml's ggml_compute_fp32_to_fp16 (after Maratyszcza's
// FP16 library), ported literally: an independent float-arithmetic route to
// the same rounding, to check the bit-manipulation F32ToF16 against.
func ggmlFP32ToFP16(f float32) uint16 {
	scaleToInf := math.Float32frombits(0x77800000)
	scaleToZero := math.Float32frombits(0x08800000)
	base := (absf(f) * scaleToInf) * scaleToZero
	w := math.Float32bits(f)
	shl1w := w + w
	sign := w & 0x80000000
	bias := shl1w & 0xFF000000
	if bias < 0x71000000 {
		bias = 0x71000000
	}
	base = math.Float32frombits((bias>>1)+0x07800000) + base
	bits := math.Float32bits(base)
	expBits := (bits >> 13) & 0x00007C00
	mantBits := bits & 0x00000FFF
	nonsign := expBits + mantBits
	if shl1w > 0xFF000000 {
		return uint16(sign>>16) | 0x7E00
	}
	return uint16(sign>>16 | nonsign)
}

// ggmlFP16ToFP32 is ggml's ggml_compute_fp16_to_fp32, ported literally.
func ggmlFP16ToFP32(h uint16) float32 {
	w := uint32(h) << 16
	sign := w & 0x80000000
	twoW := w + w
	expOffset := uint32(0xE0) << 23
	expScale := math.Float32frombits(0x07800000)
	normalized := math.Float32frombits((twoW>>4)+expOffset) * expScale
	magicMask := uint32(126) << 23
	denormalized := math.Float32frombits((twoW>>17)|magicMask) - 0.5
	var r uint32
	if twoW < 1<<27 {
		r = math.Float32bits(denormalized)
	} else {
		r = math.Float32bits(normalized)
	}
	return math.Float32frombits(sign | r)
}

func isNaN16(h uint16) bool { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }

func TestF16ToF32Known(t *testing.T) {
	for _, c := range []struct {
		h    uint16
		want float32
	}{
		{0x0000, 0},
		{0x3c00, 1},
		{0xc000, -2},
		{0x3800, 0.5},
		{0x3555, 0.333251953125},
		{0x7bff, 65504},
		{0xfbff, -65504},
		{0x0400, 1.0 / (1 << 14)},       // smallest normal
		{0x0001, 1.0 / (1 << 24)},       // smallest subnormal
		{0x03ff, 1023.0 / (1 << 24)},    // largest subnormal
		{0x8001, -1.0 / (1 << 24)},      // negative subnormal
		{0x3c01, 1 + 1.0/1024},          // one ulp above 1
		{0x7c00, float32(math.Inf(1))},  // +inf
		{0xfc00, float32(math.Inf(-1))}, // -inf
		{0x5640, 100},                   // an integer
		{0x2e66, 0.0999755859375},       // 0.1 rounded
		{0x1400, 1.0 / (1 << 10)},       // 2^-10
	} {
		if got := F16ToF32(c.h); got != c.want {
			t.Errorf("F16ToF32(%#04x) = %v, want %v", c.h, got, c.want)
		}
	}
	if got := math.Float32bits(F16ToF32(0x8000)); got != 0x80000000 {
		t.Errorf("F16ToF32(-0) bits = %#x, want -0", got)
	}
	for _, h := range []uint16{0x7e00, 0xfe00, 0x7c01, 0x7fff} {
		got := F16ToF32(h)
		if !math.IsNaN(float64(got)) {
			t.Errorf("F16ToF32(%#04x) = %v, want NaN", h, got)
		}
		if math.Float32bits(got)>>31 != uint32(h>>15) {
			t.Errorf("F16ToF32(%#04x) lost the sign", h)
		}
	}
}

func TestF16Exhaustive(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := F16ToF32(h)
		if g := ggmlFP16ToFP32(h); math.Float32bits(f) != math.Float32bits(g) && !(isNaN16(h) && f != f && g != g) {
			t.Fatalf("F16ToF32(%#04x) = %#x, ggml gives %#x", h, math.Float32bits(f), math.Float32bits(g))
		}
		if isNaN16(h) {
			if got := F32ToF16(f); got != h&0x8000|0x7e00 {
				t.Fatalf("F32ToF16(NaN from %#04x) = %#04x, want %#04x", h, got, h&0x8000|0x7e00)
			}
			continue
		}
		if got := F32ToF16(f); got != h {
			t.Fatalf("round trip %#04x -> %v -> %#04x", h, f, got)
		}
	}
}

func TestF32ToF16Rounding(t *testing.T) {
	p := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{1, 0x3c00},
		{-1, 0xbc00},
		{1 + p(-11), 0x3c00},             // tie, rounds to even (down)
		{1 + 3*p(-11), 0x3c02},           // tie, rounds to even (up)
		{1 + p(-11) + p(-23), 0x3c01},    // just above the tie
		{1 + p(-11) - p(-23), 0x3c00},    // just below the tie
		{2047 + p(-10), 0x67ff},          // exact
		{65504, 0x7bff},                  // largest finite
		{65519.996, 0x7bff},              // below the overflow tie
		{65520, 0x7c00},                  // tie between 65504 and 2^16: to even = inf
		{1e10, 0x7c00},                   // overflow
		{-1e10, 0xfc00},                  // negative overflow
		{p(-14), 0x0400},                 // smallest normal
		{p(-14) - p(-25), 0x0400},        // rounds up into the normal range
		{p(-24), 0x0001},                 // smallest subnormal
		{p(-25), 0x0000},                 // tie between 0 and 2^-24: to even = 0
		{p(-25) + p(-40), 0x0001},        // just above that tie
		{3 * p(-25), 0x0002},             // tie between 1 and 2 ulps: to even = 2
		{5 * p(-25), 0x0002},             // tie between 2 and 3 ulps: to even = 2
		{-3 * p(-25), 0x8002},            // negative subnormal tie
		{p(-26), 0x0000},                 // underflow
		{-p(-26), 0x8000},                // negative underflow keeps the sign
		{1e-30, 0x0000},                  // deep underflow
		{math.SmallestNonzeroFloat32, 0}, // float32 subnormal
		{float32(math.Inf(1)), 0x7c00},
		{float32(math.Inf(-1)), 0xfc00},
		{float32(math.NaN()), 0x7e00},
		{-float32(math.NaN()), 0xfe00},
		{math.Float32frombits(0x7f800001), 0x7e00}, // signalling NaN
		{0.1, 0x2e66},
		{1.0 / 3, 0x3555},
	} {
		if got := F32ToF16(c.f); got != c.want {
			t.Errorf("F32ToF16(%v [%#08x]) = %#04x, want %#04x", c.f, math.Float32bits(c.f), got, c.want)
		}
	}
	if got := F32ToF16(float32(math.Copysign(0, -1))); got != 0x8000 {
		t.Errorf("F32ToF16(-0) = %#04x, want 0x8000", got)
	}
}

// TestF32ToF16MatchesGGML checks F32ToF16 against ggml's float-arithmetic
// conversion on every f16 value's neighbourhood (exact values, midpoints and
// one float32 ulp either side of them) and on random bit patterns.
func TestF32ToF16MatchesGGML(t *testing.T) {
	check := func(f float32) {
		if got, want := F32ToF16(f), ggmlFP32ToFP16(f); got != want {
			t.Fatalf("F32ToF16(%v [%#08x]) = %#04x, ggml gives %#04x", f, math.Float32bits(f), got, want)
		}
	}
	for i := range 1<<15 - 1 { // all non-negative finite f16 but the largest
		lo, hi := F16ToF32(uint16(i)), F16ToF32(uint16(i+1))
		mid := float32((float64(lo) + float64(hi)) / 2) // exact in float32
		for _, f := range []float32{lo, mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, 1e9)} {
			check(f)
			check(-f)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1 << 20 {
		check(math.Float32frombits(r.Uint32()))
	}
}

func TestBF16(t *testing.T) {
	p := func(e int) float32 { return float32(math.Ldexp(1, e)) }
	for _, c := range []struct {
		f    float32
		want uint16
	}{
		{1, 0x3f80},
		{-2, 0xc000},
		{1 + p(-8), 0x3f80},          // tie to even (down)
		{1 + 3*p(-8), 0x3f82},        // tie to even (up)
		{1 + p(-8) + p(-20), 0x3f81}, // above the tie
		{math.MaxFloat32, 0x7f80},    // rounds up to inf
		{float32(math.Inf(-1)), 0xff80},
		{math.Float32frombits(0x00010000), 0x0001}, // subnormal kept
		{math.Float32frombits(0x7f800001), 0x7fc0}, // signalling NaN made quiet
		{math.Float32frombits(0xffc12345), 0xffc1}, // quiet NaN keeps sign and payload
	} {
		if got := F32ToBF16(c.f); got != c.want {
			t.Errorf("F32ToBF16(%#08x) = %#04x, want %#04x", math.Float32bits(c.f), got, c.want)
		}
	}
	for i := range 1 << 16 {
		h := uint16(i)
		f := BF16ToF32(h)
		if math.Float32bits(f) != uint32(h)<<16 {
			t.Fatalf("BF16ToF32(%#04x) = %#08x", h, math.Float32bits(f))
		}
		if f != f {
			continue
		}
		if got := F32ToBF16(f); got != h {
			t.Fatalf("bf16 round trip %#04x -> %#04x", h, got)
		}
	}
	// Against a float64 nearest-even reference on random finite inputs.
	r := rand.New(rand.NewPCG(3, 4))
	for range 1 << 18 {
		b := r.Uint32()
		f := math.Float32frombits(b)
		if f != f || math.IsInf(float64(f), 0) {
			continue
		}
		lo := b &^ 0xffff
		flo, fhi := float64(math.Float32frombits(lo)), float64(math.Float32frombits(lo+0x10000))
		want := uint16(lo >> 16)
		dlo, dhi := math.Abs(float64(f)-flo), math.Abs(fhi-float64(f))
		if math.IsInf(fhi, 0) { // the next bf16 up is inf: compare with 2^128
			dhi = math.Abs(math.Copysign(math.Ldexp(1, 128), float64(f)) - float64(f))
		}
		if dhi < dlo || dhi == dlo && want&1 == 1 {
			want++
		}
		if got := F32ToBF16(f); got != want {
			t.Fatalf("F32ToBF16(%#08x) = %#04x, want %#04x", b, got, want)
		}
	}
}
