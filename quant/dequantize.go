package quant

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// ErrUnsupported is wrapped by the errors of DequantizeRow and QuantizeRow
// for a type whose conversion this package does not implement, so that a
// loader can tell "cannot read this model" from "this file is corrupt".
var ErrUnsupported = errors.New("unsupported tensor type")

// CanDequantize reports whether DequantizeRow and DotRow accept type t, so
// that a loader can reject a model before it reads any tensor data.
func CanDequantize(t Type) bool {
	switch t {
	case F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1,
		Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K, IQ4_NL, IQ4_XS,
		IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M:
		return true
	}
	return false
}

// checkRow validates the shapes shared by DequantizeRow and QuantizeRow: n
// values of type t must be whole blocks and the packed side exactly
// RowSize(n) bytes, because a short or long buffer means the caller sliced
// the tensor wrongly and must hear about it rather than read garbage.
func checkRow(op string, t Type, n, nbytes int) error {
	want, err := t.RowSize(n)
	if err != nil {
		return fmt.Errorf("quant: %s %v: %w", op, t, err)
	}
	if nbytes != want {
		return fmt.Errorf("quant: %s %v: %d values need %d bytes, have %d", op, t, n, want, nbytes)
	}
	return nil
}

// DequantizeRow expands one row of n = len(dst) values of type t, packed in
// src, into float32. n must be a whole number of blocks of t and src exactly
// t.RowSize(n) bytes; otherwise, or when t is not one of the types that
// CanDequantize accepts, it returns an error and leaves dst untouched. The
// arithmetic is ggml's reference dequantization, value for value.
func DequantizeRow(t Type, dst []float32, src []byte) error {
	if !CanDequantize(t) {
		return fmt.Errorf("quant: dequantize %v: %w", t, ErrUnsupported)
	}
	if err := checkRow("dequantize", t, len(dst), len(src)); err != nil {
		return err
	}
	dequantize(t, dst, src)
	return nil
}

// dequantize dispatches on t with shapes already validated. It is a switch of
// direct calls rather than a table of funcs so that escape analysis can see
// that dst does not escape, which keeps DotRow's stack buffer off the heap.
func dequantize(t Type, dst []float32, src []byte) {
	switch t {
	case F32:
		dequantizeF32(dst, src)
	case F16:
		dequantizeF16(dst, src)
	case BF16:
		dequantizeBF16(dst, src)
	case Q4_0:
		dequantizeQ4_0(dst, src)
	case Q4_1:
		dequantizeQ4_1(dst, src)
	case Q5_0:
		dequantizeQ5_0(dst, src)
	case Q5_1:
		dequantizeQ5_1(dst, src)
	case Q8_0:
		dequantizeQ8_0(dst, src)
	case Q8_1:
		dequantizeQ8_1(dst, src)
	case Q2_K:
		dequantizeQ2_K(dst, src)
	case Q3_K:
		dequantizeQ3_K(dst, src)
	case Q4_K:
		dequantizeQ4_K(dst, src)
	case Q5_K:
		dequantizeQ5_K(dst, src)
	case Q6_K:
		dequantizeQ6_K(dst, src)
	case Q8_K:
		dequantizeQ8_K(dst, src)
	case IQ4_NL:
		dequantizeIQ4_NL(dst, src)
	case IQ4_XS:
		dequantizeIQ4_XS(dst, src)
	case IQ2_XXS:
		dequantizeIQ2_XXS(dst, src)
	case IQ2_XS:
		dequantizeIQ2_XS(dst, src)
	case IQ2_S:
		dequantizeIQ2_S(dst, src)
	case IQ3_XXS:
		dequantizeIQ3_XXS(dst, src)
	case IQ3_S:
		dequantizeIQ3_S(dst, src)
	case IQ1_S:
		dequantizeIQ1_S(dst, src)
	case IQ1_M:
		dequantizeIQ1_M(dst, src)
	}
}

func dequantizeF32(dst []float32, src []byte) {
	src = src[:4*len(dst)]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func dequantizeF16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = f16Table[binary.LittleEndian.Uint16(src[2*i:])]
	}
}

func dequantizeBF16(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

// f16At reads the little-endian f16 at b[0:2] as float32.
func f16At(b []byte) float32 { return f16Table[uint16(b[0])|uint16(b[1])<<8] }

// putF16 stores f as a little-endian f16 at b[0:2].
func putF16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, F32ToF16(f)) }
