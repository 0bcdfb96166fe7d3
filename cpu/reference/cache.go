package reference

import "fmt"

// Cache holds the keys and values of one sequence, per layer, as float32
// rows of KVHeads×HeadDim values (rounded to f16 as llama.cpp's are).
//
// Positions [0, Len) are committed. Forward appends at Len; Truncate drops
// the tail, which is how a rejected speculation is forgotten.
type Cache struct {
	K, V  [][]float32 // [layer][pos*kvDim : (pos+1)*kvDim]
	Len   int
	kvDim int
	cap   int
}

// NewCache allocates a cache for ctx positions.
func NewCache(layers, kvDim, ctx int) *Cache {
	c := &Cache{K: make([][]float32, layers), V: make([][]float32, layers), kvDim: kvDim, cap: ctx}
	for l := range c.K {
		c.K[l] = make([]float32, ctx*kvDim)
		c.V[l] = make([]float32, ctx*kvDim)
	}
	return c
}

// Cap is the number of positions the cache holds.
func (c *Cache) Cap() int { return c.cap }

// Truncate forgets positions n and after.
func (c *Cache) Truncate(n int) error {
	if n < 0 || n > c.Len {
		return fmt.Errorf("truncate KV cache to %d: it holds %d positions", n, c.Len)
	}
	c.Len = n
	return nil
}

// key and value return the rows of layer l at position pos.
func (c *Cache) key(l, pos int) []float32 {
	return c.K[l][pos*c.kvDim : (pos+1)*c.kvDim]
}

func (c *Cache) value(l, pos int) []float32 {
	return c.V[l][pos*c.kvDim : (pos+1)*c.kvDim]
}
