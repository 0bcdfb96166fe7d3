package synth

import (
	"fmt"
	"math"
	"math/bits"

	"dovetail/quant"
)

// MaxBytes bounds the models Build makes, which it holds in memory whole
// before writing: 1 TiB, past what any machine it runs on has (a caller
// checks the memory it has).
const MaxBytes = 1 << 40

// Bytes is the size of the tensors Build writes for s with matrices of
// type t: what it holds in memory. ok is false when that is past 2^64
// bytes (a shape of absurd numbers).
func (s Shape) Bytes(t quant.Type) (n uint64, ok bool) {
	var c counter
	matrix := func(cols, rows uint64) uint64 {
		mt := quant.F32
		if cols <= math.MaxInt {
			mt = matrixType(t, int(cols))
		}
		bs := uint64(mt.BlockSize())
		return c.mul(c.mul((cols+bs-1)/bs, uint64(mt.TypeSize())), rows)
	}
	dim, ffn, vocab := uint64(s.Dim), uint64(s.FFN), uint64(s.Vocab)
	kv := dim / uint64(s.Heads) * uint64(s.KVHeads)
	layer := c.mul(2*4, dim) // attn_norm, ffn_norm
	for _, m := range [][2]uint64{{dim, dim}, {dim, kv}, {dim, kv}, {dim, dim}, {dim, ffn}, {dim, ffn}, {ffn, dim}} {
		layer = c.add(layer, matrix(m[0], m[1]))
	}
	n = c.add(matrix(dim, vocab), matrix(dim, vocab)) // token_embd, output
	n = c.add(n, c.mul(4, dim))                       // output_norm
	n = c.add(n, c.mul(layer, uint64(s.Layers)))
	if c.over {
		return 0, false
	}
	return n, true
}

// counter adds and multiplies sizes, remembering whether one overflowed.
type counter struct{ over bool }

func (c *counter) add(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	c.over = c.over || carry != 0
	return s
}

func (c *counter) mul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	c.over = c.over || hi != 0
	return lo
}

// TooLargeError is a shape whose model does not fit in memory (Bytes 0:
// past 2^64 bytes).
type TooLargeError struct {
	Shape     Shape
	Type      quant.Type
	Bytes     uint64
	Available uint64 // the memory it was measured against (0: MaxBytes)
}

func (e *TooLargeError) Error() string {
	s := e.Shape
	shape := fmt.Sprintf("dim=%d,layers=%d,heads=%d,kv=%d,ffn=%d,vocab=%d", s.Dim, s.Layers, s.Heads, s.KVHeads, s.FFN, s.Vocab)
	size := "more than 2^64 bytes"
	if e.Bytes > 0 {
		size = fmt.Sprintf("%d bytes (%.1f GiB)", e.Bytes, float64(e.Bytes)/(1<<30))
	}
	limit := fmt.Sprintf("the %.0f GiB synth makes at most", float64(MaxBytes)/(1<<30))
	if e.Available > 0 {
		limit = fmt.Sprintf("the %.1f GiB of memory available", float64(e.Available)/(1<<30))
	}
	return fmt.Sprintf("synth: shape %s in %v needs %s, more than %s: choose a smaller shape or type", shape, e.Type, size, limit)
}
