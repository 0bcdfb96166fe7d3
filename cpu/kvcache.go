package cpu

// KVCache is one sequence's keys and values on the CPU: per layer, f16
// rows of KVHeads×HeadDim values, the committed positions first and the
// pending tree's nodes after them (slot committed+i for node i).
type KVCache struct {
	k, v [][]uint16 // [layer][slot*dim + i]
	dim  int
}

// newKVCache allocates a cache of ctx slots for layers layers.
func newKVCache(layers, dim, ctx int) KVCache {
	c := KVCache{k: make([][]uint16, layers), v: make([][]uint16, layers), dim: dim}
	for l := range c.k {
		c.k[l] = make([]uint16, ctx*dim)
		c.v[l] = make([]uint16, ctx*dim)
	}
	return c
}

// slot is layer l's key and value rows at slot i, to write.
func (c *KVCache) slot(l, i int) (k, v []uint16) {
	return c.k[l][i*c.dim : (i+1)*c.dim], c.v[l][i*c.dim : (i+1)*c.dim]
}

// first is layer l's keys and values of slots [0, n), which attention
// reads.
func (c *KVCache) first(l, n int) (k, v []uint16) {
	return c.k[l][:n*c.dim], c.v[l][:n*c.dim]
}

// move copies slot from's keys and values to slot to in every layer: a
// pending node that a commit keeps moves down beside the committed ones.
func (c *KVCache) move(to, from int) {
	d := c.dim
	for l := range c.k {
		copy(c.k[l][to*d:(to+1)*d], c.k[l][from*d:(from+1)*d])
		copy(c.v[l][to*d:(to+1)*d], c.v[l][from*d:(from+1)*d])
	}
}
