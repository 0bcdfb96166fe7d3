// Package quant holds the number formats of ggml weights: their block
// layouts, and pure-Go dequantization, quantization and dot products that
// serve as the reference for the SIMD kernels in package cpu.
package quant

import (
	"fmt"
	"strings"
)

// Type is a ggml tensor type id, as stored in GGUF tensor infos.
type Type uint32

// The ids are ggml's; gaps are types ggml removed or that Dovetail does not read.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
)

// QK is the block size of the small formats; QKK that of the k-quants.
const (
	QK  = 32
	QKK = 256
)

type typeInfo struct {
	name      string
	blockSize int // values per block
	typeSize  int // bytes per block
}

var types = map[Type]typeInfo{
	F32:     {"F32", 1, 4},
	F16:     {"F16", 1, 2},
	BF16:    {"BF16", 1, 2},
	F64:     {"F64", 1, 8},
	I8:      {"I8", 1, 1},
	I16:     {"I16", 1, 2},
	I32:     {"I32", 1, 4},
	I64:     {"I64", 1, 8},
	Q4_0:    {"Q4_0", QK, 2 + QK/2},
	Q4_1:    {"Q4_1", QK, 4 + QK/2},
	Q5_0:    {"Q5_0", QK, 2 + 4 + QK/2},
	Q5_1:    {"Q5_1", QK, 4 + 4 + QK/2},
	Q8_0:    {"Q8_0", QK, 2 + QK},
	Q8_1:    {"Q8_1", QK, 4 + QK},
	Q2_K:    {"Q2_K", QKK, QKK/16 + QKK/4 + 2 + 2},
	Q3_K:    {"Q3_K", QKK, QKK/8 + QKK/4 + 12 + 2},
	Q4_K:    {"Q4_K", QKK, 2 + 2 + 12 + QKK/2},
	Q5_K:    {"Q5_K", QKK, 2 + 2 + 12 + QKK/8 + QKK/2},
	Q6_K:    {"Q6_K", QKK, QKK/2 + QKK/4 + QKK/16 + 2},
	Q8_K:    {"Q8_K", QKK, 4 + QKK + QKK/16*2},
	IQ2_XXS: {"IQ2_XXS", QKK, blockIQ2_XXS},
	IQ2_XS:  {"IQ2_XS", QKK, blockIQ2_XS},
	IQ2_S:   {"IQ2_S", QKK, blockIQ2_S},
	IQ3_XXS: {"IQ3_XXS", QKK, blockIQ3_XXS},
	IQ3_S:   {"IQ3_S", QKK, blockIQ3_S},
	IQ1_S:   {"IQ1_S", QKK, blockIQ1_S},
	IQ1_M:   {"IQ1_M", QKK, blockIQ1_M},
	IQ4_NL:  {"IQ4_NL", QK, blockIQ4_NL},
	IQ4_XS:  {"IQ4_XS", QKK, blockIQ4_XS},
}

// ggmlOnly names ggml's types whose layout this package does not know, so
// that refusing a file can say which type it holds.
var ggmlOnly = map[Type]string{
	34: "TQ1_0", 35: "TQ2_0",
}

// Known reports whether t is a type whose layout this package knows.
func (t Type) Known() bool { _, ok := types[t]; return ok }

func (t Type) String() string {
	if ti, ok := types[t]; ok {
		return ti.name
	}
	if name, ok := ggmlOnly[t]; ok {
		return name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// BlockSize is the number of values in one block (1 for plain formats).
func (t Type) BlockSize() int { return types[t].blockSize }

// TypeSize is the number of bytes of one block.
func (t Type) TypeSize() int { return types[t].typeSize }

// RowSize returns the bytes of n values of type t, or an error when n is not
// a whole number of blocks or t is unknown.
func (t Type) RowSize(n int) (int, error) {
	ti, ok := types[t]
	if !ok {
		return 0, fmt.Errorf("unknown tensor type %d", uint32(t))
	}
	if n < 0 || n%ti.blockSize != 0 {
		return 0, fmt.Errorf("%d values of %s: not a multiple of its block size %d", n, ti.name, ti.blockSize)
	}
	return n / ti.blockSize * ti.typeSize, nil
}

// ParseType maps a name such as "q8_0" or "F16" to its type.
func ParseType(s string) (Type, error) {
	for t, ti := range types {
		if strings.EqualFold(ti.name, s) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown tensor type %q", s)
}
