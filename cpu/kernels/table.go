package kernels

import (
	"strings"

	"dovetail/quant"
)

// weightKernel is one line of the kernel table: a weight type the C
// libraries multiply, and all that the Go side needs to know of its
// kernels. Everything else that depends on the type (the symbols a library
// must export, MatMul's and the thread pool's dispatch, ActivationType,
// the Go reference, the tests' and benchmarks' lists of types) is derived
// from the table, so that a new kernel is its C code, its Go reference, a
// line here and a line of the tests' typeTests (kernels_test.go); see
// README.md, "Adding a kernel".
type weightKernel struct {
	t quant.Type
	// act is the form of the activations the kernels multiply the
	// weights by (ActivationType).
	act quant.Type
	// layouts says which C functions the type has. Their names are the
	// type's in lower case (cName): every level exports dt_matmul_<name>
	// (GGUF rows), and for packable also dt_pack_<name> and
	// dt_matmul_packed_<name> (doing nothing where dt_pack_rows is 0).
	layouts layouts
	// ref is the Go reference for one dot product of a weight row and an
	// activation row of cols values: the "go" level's kernel and what the
	// tests hold every level to.
	ref func(w, act []byte, cols int) float32
}

// layouts are the layouts of the weights a type's C kernels multiply.
type layouts uint8

const (
	ggufOnly layouts = iota // the GGUF rows only
	packable                // also packed at the levels that pack (Set.Pack)
)

// table is the kernel table, one line per weight type with C kernels.
var table = [...]weightKernel{
	{quant.Q8_0, quant.Q8_0, packable, quant.DotQ8_0},
	{quant.Q4_0, quant.Q8_0, packable, quant.DotQ4_0Q8_0},
	{quant.Q5_0, quant.Q8_0, packable, quant.DotQ5_0Q8_0},
	// Q4_1 and Q5_1 with Q8_0 activations where llama.cpp takes Q8_1: see
	// quant.DotQ4_1Q8_0.
	{quant.Q4_1, quant.Q8_0, packable, quant.DotQ4_1Q8_0},
	{quant.Q5_1, quant.Q8_0, packable, quant.DotQ5_1Q8_0},
	{quant.IQ4_NL, quant.Q8_0, packable, quant.DotIQ4_NLQ8_0},
	{quant.Q2_K, quant.Q8_K, packable, quant.DotQ2_KQ8_K},
	{quant.Q3_K, quant.Q8_K, packable, quant.DotQ3_KQ8_K},
	{quant.Q4_K, quant.Q8_K, packable, quant.DotQ4_KQ8_K},
	{quant.Q5_K, quant.Q8_K, packable, quant.DotQ5_KQ8_K},
	{quant.Q6_K, quant.Q8_K, packable, quant.DotQ6_KQ8_K},
	{quant.IQ4_XS, quant.Q8_K, packable, quant.DotIQ4_XSQ8_K},
	{quant.IQ3_S, quant.Q8_K, ggufOnly, quant.DotIQ3_SQ8_K},
	{quant.IQ3_XXS, quant.Q8_K, ggufOnly, quant.DotIQ3_XXSQ8_K},
	{quant.IQ2_XXS, quant.Q8_K, ggufOnly, quant.DotIQ2_XXSQ8_K},
	{quant.IQ2_XS, quant.Q8_K, ggufOnly, quant.DotIQ2_XSQ8_K},
	{quant.IQ2_S, quant.Q8_K, ggufOnly, quant.DotIQ2_SQ8_K},
	{quant.IQ1_S, quant.Q8_K, ggufOnly, quant.DotIQ1_SQ8_K},
	{quant.IQ1_M, quant.Q8_K, ggufOnly, quant.DotIQ1_MQ8_K},
	{quant.F16, quant.F16, packable, dotF16},
	{quant.BF16, quant.BF16, packable, dotBF16},
	{quant.F32, quant.F32, ggufOnly, dotF32},
}

// typeSlots bounds the ggml type ids the table may hold (ggml's run to 39
// today), so that dispatch indexes arrays rather than looking up a map on
// every call.
const typeSlots = 64

// byType is the table indexed by type; nil for a type without C kernels.
var byType = func() (k [typeSlots]*weightKernel) {
	for i := range table {
		t := table[i].t
		if int(t) >= typeSlots || k[t] != nil {
			panic("kernels: the kernel table has type " + t.String() + " out of range or twice")
		}
		k[t] = &table[i]
	}
	return k
}()

// kernelOf returns t's line of the table, or nil.
func kernelOf(t quant.Type) *weightKernel {
	if int(t) < len(byType) {
		return byType[t]
	}
	return nil
}

// native reports whether the C kernels implement MatMul for t.
func native(t quant.Type) bool { return kernelOf(t) != nil }

// cName is the name of t's kernels in the C functions' names.
func cName(t quant.Type) string { return strings.ToLower(t.String()) }

// ActivationType is the form activations take for weights of type t, as in
// llama.cpp (its vec_dot_type, but Q8_0 where it takes Q8_1 for Q4_1 and
// Q5_1: see quant.DotQ4_1Q8_0): the kernel table's act, which is Q8_0 for
// the 32-value quantized types, Q8_K for the 256-value ones (the k-quants
// and most i-quants), f16 for F16 and bf16 for BF16; float32 for F32 and
// every type without C kernels.
func ActivationType(t quant.Type) quant.Type {
	if k := kernelOf(t); k != nil {
		return k.act
	}
	return quant.F32
}
