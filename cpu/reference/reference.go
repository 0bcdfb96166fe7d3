// Package reference is the readable pure-Go forward pass of a
// llama-family model, one token at a time, in the manner of llama2.c: the
// oracle the CPU target's tuned path (package cpu) and the golden tests
// are held to. It dequantizes each weight row on the fly from its own
// type, so files that mix formats run as they are, and it does llama.cpp's
// arithmetic: an f16 KV cache, q and the attention weights rounded to
// f16, activations in the form each weight type multiplies them in
// (Q8_0 for Q8_0 and Q4_0 weights, Q8_K for the k-quants, ...).
//
// It shares no code with package cpu beyond the pure-Go kernels, on
// purpose: an oracle that called the code it checks would check nothing.
package reference

import (
	"fmt"
	"math"

	"dovetail/internal/pending"
	"dovetail/models"
	"dovetail/quant"
)

// Reference runs a model for sequences of up to ctx positions.
type Reference struct {
	M       *models.Llama
	threads int
	ctx     int
}

// New prepares m for a context of ctx positions (≤ 0: the model's own
// context length), its products split over threads goroutines.
func New(m *models.Llama, threads, ctx int) *Reference {
	if ctx <= 0 {
		ctx = m.Config.ContextLength
	}
	return &Reference{M: m, threads: max(threads, 1), ctx: ctx}
}

// State is one sequence: its KV cache, the tree of pending nodes after the
// committed positions (in cache slots Len+i), and scratch buffers.
type State struct {
	Cache                             *Cache
	x, xb, xb2, q, k, v, att, hb, hb2 []float32
	a                                 *acts
	vis                               []int
	pending                           pending.Tree
	// Before, when set, is handed the residual stream before each layer
	// runs (un-normed, valid during the call): what an EAGLE-3 draft reads.
	Before func(layer int, x []float32)
}

// NewState allocates a sequence for the reference's context.
func (r *Reference) NewState() *State {
	c := r.M.Config
	kv := c.KVHeads * c.HeadDim
	return &State{
		Cache: NewCache(c.Layers, kv, r.ctx),
		x:     make([]float32, c.Hidden), xb: make([]float32, c.Hidden), xb2: make([]float32, c.Hidden),
		q: make([]float32, c.Hidden), k: make([]float32, kv), v: make([]float32, kv),
		att: make([]float32, r.ctx), hb: make([]float32, c.FFN), hb2: make([]float32, c.FFN),
		a: newActs(max(c.Hidden, c.FFN)),
	}
}

// visible lists the cache slots a node at slot sees: the committed prefix,
// the pending ancestors of parent (-1: none), and slot itself.
func (s *State) visible(parent, slot int) []int {
	v := s.vis[:0]
	for t := 0; t < s.Cache.Len; t++ {
		v = append(v, t)
	}
	v = s.pending.Path(v, parent, s.Cache.Len)
	v = append(v, slot)
	s.vis = v
	return v
}

// Forward runs token at the next position of s and appends its keys and
// values to the cache. hidden[Hidden] receives the final normed state (the
// vector the output matrix multiplies) and logits[Vocab] the logits; either
// may be nil to skip it. Pending tree nodes, if any, are dropped.
func (r *Reference) Forward(s *State, token int, logits, hidden []float32) error {
	s.pending.Reset()
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
	for l := range r.M.Layers {
		if s.Before != nil {
			s.Before(l, s.x)
		}
		r.attention(s, l, slot, pos, visible)
		r.mlp(s, l)
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
		r.matmul(logits, r.M.Output, s.a)
	}
	return nil
}

// attention is layer l's attention block: x += O·attention(q, k, v) of
// RMSNorm(x), the new keys and values in cache slot slot.
func (r *Reference) attention(s *State, l, slot, pos int, visible []int) {
	c, w := r.M.Config, &r.M.Layers[l]
	hd := c.HeadDim
	group := c.Heads / c.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	rmsnorm(s.xb, s.x, w.AttnNorm, c.RMSEps)
	s.a.set(s.xb)
	r.matmul(s.q, w.Q, s.a)
	r.matmul(s.k, w.K, s.a)
	r.matmul(s.v, w.V, s.a)
	if c.QKVBias {
		add(s.q, w.QBias)
		add(s.k, w.KBias)
		add(s.v, w.VBias)
	}
	rope(s.q, c.Heads, c, r.M.RopeFreqs, pos)
	rope(s.k, c.KVHeads, c, r.M.RopeFreqs, pos)
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
	r.matmul(s.xb, w.O, s.a)
	add(s.x, s.xb)
}

// mlp is layer l's SwiGLU block: x += Down·(SiLU(Gate·xn) ⊙ Up·xn), xn =
// RMSNorm(x).
func (r *Reference) mlp(s *State, l int) {
	c, w := r.M.Config, &r.M.Layers[l]
	rmsnorm(s.xb, s.x, w.FFNNorm, c.RMSEps)
	s.a.set(s.xb)
	r.matmul(s.hb, w.Gate, s.a)
	r.matmul(s.hb2, w.Up, s.a)
	swiglu(s.hb, s.hb, s.hb2)
	s.a.set(s.hb)
	r.matmul(s.xb, w.Down, s.a)
	add(s.x, s.xb)
}

func roundF16(x []float32) {
	for i, v := range x {
		x[i] = quant.F16ToF32(quant.F32ToF16(v))
	}
}
