package quant

import "math"

// f16Table holds the float32 value of every IEEE binary16 bit pattern. A
// table lookup beats the bit manipulation on the dequantization hot path,
// where every block starts with an f16 scale, and 256 KiB is cheap.
var f16Table [1 << 16]float32

func init() {
	for i := range f16Table {
		f16Table[i] = f16ToF32Slow(uint16(i))
	}
}

// F16ToF32 widens an IEEE binary16 value to float32. The conversion is exact
// for every input: subnormals become normal float32s, infinities stay
// infinite and NaNs keep their sign and payload.
func F16ToF32(h uint16) float32 { return f16Table[h] }

// f16ToF32Slow is the bit-level conversion that fills f16Table.
func f16ToF32Slow(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f: // inf or NaN: widen the payload
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0: // zero or subnormal: man * 2^-24, exact in float32
		v := float32(man) * (1.0 / (1 << 24))
		return math.Float32frombits(sign | math.Float32bits(v))
	default:
		return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
	}
}

// F32ToF16 narrows a float32 to IEEE binary16, rounding to nearest with ties
// to even, as ggml's GGML_FP32_TO_FP16 does. Values beyond the f16 range
// become infinities, values below half the smallest subnormal become signed
// zeros, and every NaN becomes ggml's quiet NaN 0x7e00 with the input's sign,
// so that quantized files match ggml's byte for byte.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15 // biased f16 exponent
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		// Subnormal result: the value is m * 2^-24 with m = M >> s, where M
		// is the float32 significand with its implicit bit.
		s := uint32(14 - e)
		if s > 24 || exp == 0 {
			return sign // below 2^-25 (or a float32 subnormal): rounds to zero
		}
		m := man | 0x800000
		q := m >> s
		rem := m & (1<<s - 1)
		half := uint32(1) << (s - 1)
		if rem > half || rem == half && q&1 == 1 {
			q++ // may carry into the exponent: 0x400 is the smallest normal
		}
		return sign | uint16(q)
	}
	h := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // a carry out of the mantissa bumps the exponent, up to inf
	}
	return sign | uint16(h)
}

// BF16ToF32 widens a bfloat16 value to float32; bfloat16 is the upper half
// of a float32, so this is exact.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 narrows a float32 to bfloat16 with round to nearest even, and
// makes NaNs quiet without losing their upper payload bits, exactly like
// ggml's GGML_FP32_TO_BF16. Subnormals are not flushed to zero.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 64
	}
	return uint16((b + 0x7fff + (b>>16)&1) >> 16)
}
