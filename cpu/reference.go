package cpu

import (
	"fmt"
	"math"
	"slices"

	"dovetail/models"
	"dovetail/quant"
)

// Reference is the readable pure-Go forward pass of a llama-family model,
// one token at a time. It dequantizes each weight row on the fly from its
// own type, so files that mix formats run as they are. It is the yardstick
// the fast paths are tested against.
type Reference struct {
	M    *models.Llama
	pool *Pool
	rope *ropeTable
}

// NewReference prepares a model for a context of ctx positions (0: the
// model's own context length) on a pool of threads.
func NewReference(m *models.Llama, pool *Pool, ctx int) *Reference {
	if ctx <= 0 {
		ctx = m.Config.ContextLength
	}
	return &Reference{M: m, pool: pool, rope: newRopeTable(m.Config, m.RopeFreqs, ctx)}
}

// State is one sequence: its KV cache and scratch buffers.
type State struct {
	Cache                             *KVCache
	x, xb, xb2, q, k, v, att, hb, hb2 []float32
	a                                 *acts
	vis                               []int
	pending                           []treeNode // tree nodes after the committed prefix, in slots Len+i
}

type treeNode struct{ parent, depth int }

// visible lists the cache slots a node at slot sees: the committed prefix,
// the pending ancestors of parent (-1: none), and slot itself.
func (s *State) visible(parent, slot int) []int {
	v := s.vis[:0]
	for t := 0; t < s.Cache.Len; t++ {
		v = append(v, t)
	}
	mark := len(v)
	for p := parent; p >= 0; p = s.pending[p].parent {
		v = append(v, s.Cache.Len+p)
	}
	slices.Reverse(v[mark:])
	v = append(v, slot)
	s.vis = v
	return v
}

// NewState allocates a sequence for the reference's context.
func (r *Reference) NewState() *State {
	c := r.M.Config
	kv := c.KVHeads * c.HeadDim
	ctx := len(r.rope.cos) / r.rope.pairs
	return &State{
		Cache: NewKVCache(c.Layers, kv, ctx),
		x:     make([]float32, c.Hidden), xb: make([]float32, c.Hidden), xb2: make([]float32, c.Hidden),
		q: make([]float32, c.Hidden), k: make([]float32, kv), v: make([]float32, kv),
		att: make([]float32, ctx), hb: make([]float32, c.FFN), hb2: make([]float32, c.FFN),
		a: newActs(max(c.Hidden, c.FFN)),
	}
}

// Forward runs token at the next position of s and appends its keys and
// values to the cache. hidden[Hidden] receives the final normed state (the
// vector the output matrix multiplies) and logits[Vocab] the logits; either
// may be nil to skip it. Pending tree nodes, if any, are dropped.
func (r *Reference) Forward(s *State, token int, logits, hidden []float32) error {
	s.pending = s.pending[:0]
	pos := s.Cache.Len
	if pos >= s.Cache.Cap() {
		return fmt.Errorf("context full: %d positions", s.Cache.Cap())
	}
	if err := r.forward(s, token, pos, pos, s.visible(-1, pos), logits, hidden); err != nil {
		return err
	}
	s.Cache.Len++
	return nil
}

// forward runs token at position pos, storing its keys and values in cache
// slot slot, attending to the cache slots in visible (ascending, ending with
// slot itself).
func (r *Reference) forward(s *State, token, slot, pos int, visible []int, logits, hidden []float32) error {
	c := r.M.Config
	if token < 0 || token >= c.Vocab {
		return fmt.Errorf("token %d out of vocabulary range [0, %d)", token, c.Vocab)
	}
	if err := quant.DequantizeRow(r.M.TokenEmbd.Type, s.x, r.M.TokenEmbd.Row(token)); err != nil {
		return err
	}
	hd := c.HeadDim
	group := c.Heads / c.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	for l := range r.M.Layers {
		w := &r.M.Layers[l]
		// Attention.
		rmsnorm(s.xb, s.x, w.AttnNorm, c.RMSEps)
		s.a.set(s.xb)
		matmul(r.pool, s.q, w.Q, s.a)
		matmul(r.pool, s.k, w.K, s.a)
		matmul(r.pool, s.v, w.V, s.a)
		if c.QKVBias {
			add(s.q, w.QBias)
			add(s.k, w.KBias)
			add(s.v, w.VBias)
		}
		rope(s.q, c.Heads, hd, c.RopeStyle, r.rope, pos)
		rope(s.k, c.KVHeads, hd, c.RopeStyle, r.rope, pos)
		roundF16(s.k)
		roundF16(s.v)
		roundF16(s.q)
		copy(s.Cache.key(l, slot), s.k)
		copy(s.Cache.value(l, slot), s.v)
		for h := 0; h < c.Heads; h++ {
			q := s.q[h*hd : (h+1)*hd]
			kvh := (h / group) * hd
			att := s.att[:len(visible)]
			for i, t := range visible {
				att[i] = dot(q, s.Cache.key(l, t)[kvh:kvh+hd]) * scale
			}
			softmax(att)
			roundF16(att)
			out := s.xb2[h*hd : (h+1)*hd]
			clear(out)
			for i, a := range att {
				v := s.Cache.value(l, visible[i])[kvh : kvh+hd]
				for i := range out {
					out[i] += a * v[i]
				}
			}
		}
		s.a.set(s.xb2)
		matmul(r.pool, s.xb, w.O, s.a)
		add(s.x, s.xb)
		// SwiGLU MLP.
		rmsnorm(s.xb, s.x, w.FFNNorm, c.RMSEps)
		s.a.set(s.xb)
		matmul(r.pool, s.hb, w.Gate, s.a)
		matmul(r.pool, s.hb2, w.Up, s.a)
		swiglu(s.hb, s.hb, s.hb2)
		s.a.set(s.hb)
		matmul(r.pool, s.xb, w.Down, s.a)
		add(s.x, s.xb)
	}
	if hidden == nil && logits == nil {
		return nil
	}
	if hidden == nil {
		hidden = s.xb
	}
	rmsnorm(hidden, s.x, r.M.OutputNorm, c.RMSEps)
	if logits != nil {
		s.a.set(hidden)
		matmul(r.pool, logits, r.M.Output, s.a)
	}
	return nil
}

func roundF16(x []float32) {
	for i, v := range x {
		x[i] = quant.F16ToF32(quant.F32ToF16(v))
	}
}
