package quant

import (
	"math/rand/v2"
	"testing"
)

// The benchmarks use a 4096-value row, the width of a 7B model's hidden
// state; SetBytes counts the packed weight bytes read.
const benchN = 4096

func benchRow(b *testing.B, typ Type) ([]byte, []float32) {
	r := rand.New(rand.NewPCG(19, 20))
	x := randomFloats(r, benchN)
	size, _ := typ.RowSize(benchN)
	w := make([]byte, size)
	if CanQuantize(typ) {
		if err := QuantizeRow(typ, w, randomFloats(r, benchN)); err != nil {
			b.Fatal(err)
		}
	} else {
		w = randomRow(r, typ, benchN)
	}
	b.SetBytes(int64(size))
	return w, x
}

func benchDequantize(b *testing.B, typ Type) {
	w, _ := benchRow(b, typ)
	dst := make([]float32, benchN)
	for b.Loop() {
		_ = DequantizeRow(typ, dst, w)
	}
}

func BenchmarkDequantizeF16(b *testing.B)  { benchDequantize(b, F16) }
func BenchmarkDequantizeQ8_0(b *testing.B) { benchDequantize(b, Q8_0) }
func BenchmarkDequantizeQ4_0(b *testing.B) { benchDequantize(b, Q4_0) }
func BenchmarkDequantizeQ4_K(b *testing.B) { benchDequantize(b, Q4_K) }
func BenchmarkDequantizeQ6_K(b *testing.B) { benchDequantize(b, Q6_K) }

var sink float32

func benchDotRow(b *testing.B, typ Type) {
	w, x := benchRow(b, typ)
	for b.Loop() {
		sink = DotRow(typ, w, x)
	}
}

func BenchmarkDotRowF16(b *testing.B)  { benchDotRow(b, F16) }
func BenchmarkDotRowQ8_0(b *testing.B) { benchDotRow(b, Q8_0) }
func BenchmarkDotRowQ4_0(b *testing.B) { benchDotRow(b, Q4_0) }
func BenchmarkDotRowQ4_K(b *testing.B) { benchDotRow(b, Q4_K) }
func BenchmarkDotRowQ6_K(b *testing.B) { benchDotRow(b, Q6_K) }

func benchDotInt8(b *testing.B, typ, act Type, dot func(w, xq []byte, n int) float32) {
	w, x := benchRow(b, typ)
	size, _ := act.RowSize(benchN)
	xq := make([]byte, size)
	if err := QuantizeRow(act, xq, x); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		sink = dot(w, xq, benchN)
	}
}

func BenchmarkDotQ8_0(b *testing.B)     { benchDotInt8(b, Q8_0, Q8_0, DotQ8_0) }
func BenchmarkDotQ4_0Q8_0(b *testing.B) { benchDotInt8(b, Q4_0, Q8_0, DotQ4_0Q8_0) }
func BenchmarkDotQ4_KQ8_K(b *testing.B) { benchDotInt8(b, Q4_K, Q8_K, DotQ4_KQ8_K) }
func BenchmarkDotQ6_KQ8_K(b *testing.B) { benchDotInt8(b, Q6_K, Q8_K, DotQ6_KQ8_K) }

func benchQuantize(b *testing.B, typ Type) {
	r := rand.New(rand.NewPCG(21, 22))
	x := randomFloats(r, benchN)
	size, _ := typ.RowSize(benchN)
	dst := make([]byte, size)
	b.SetBytes(4 * benchN)
	for b.Loop() {
		_ = QuantizeRow(typ, dst, x)
	}
}

// Activations are quantized once per matmul, so these matter for the int8
// path; the k-quant weight quantizers only for model generation.
func BenchmarkQuantizeQ8_0(b *testing.B) { benchQuantize(b, Q8_0) }
func BenchmarkQuantizeQ8_K(b *testing.B) { benchQuantize(b, Q8_K) }
func BenchmarkQuantizeQ4_K(b *testing.B) { benchQuantize(b, Q4_K) }
