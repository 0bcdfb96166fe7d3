package quant

import (
	"encoding/binary"
	"fmt"
	"math"
)

// CanQuantize reports whether QuantizeRow accepts type t.
func CanQuantize(t Type) bool {
	switch t {
	case F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS:
		return true
	}
	return false
}

// QuantizeRow packs the n = len(src) values of src into dst as type t, with
// ggml's reference quantizers (quantize_row_*_ref: no importance matrix), so
// that the bytes match what ggml writes for the same input. n must be a whole
// number of blocks of t and dst exactly t.RowSize(n) bytes; otherwise, or when
// CanQuantize(t) is false, it returns an error and leaves dst untouched.
//
// Q8_0 and Q8_K are also the formats the int8 dot products take their
// activations in (DotQ8_0, DotQ4_0Q8_0, DotQ4_KQ8_K, DotQ6_KQ8_K).
func QuantizeRow(t Type, dst []byte, src []float32) error {
	if !CanQuantize(t) {
		return fmt.Errorf("quant: quantize %v: %w", t, ErrUnsupported)
	}
	if err := checkRow("quantize", t, len(src), len(dst)); err != nil {
		return err
	}
	switch t {
	case F32:
		for i, v := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
		}
	case F16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
		}
	case BF16:
		for i, v := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
		}
	case Q4_0:
		quantizeQ4_0(dst, src)
	case Q4_1:
		quantizeQ4_1(dst, src)
	case Q5_0:
		quantizeQ5_0(dst, src)
	case Q5_1:
		quantizeQ5_1(dst, src)
	case Q8_0:
		quantizeQ8_0(dst, src)
	case Q8_1:
		quantizeQ8_1(dst, src)
	case Q2_K:
		quantizeQ2_K(dst, src)
	case Q3_K:
		quantizeQ3_K(dst, src)
	case Q4_K:
		quantizeQ4_K(dst, src)
	case Q5_K:
		quantizeQ5_K(dst, src)
	case Q6_K:
		quantizeQ6_K(dst, src)
	case Q8_K:
		quantizeQ8_K(dst, src)
	case IQ4_NL:
		quantizeIQ4_NL(dst, src)
	case IQ4_XS:
		quantizeIQ4_XS(dst, src)
	}
	return nil
}
