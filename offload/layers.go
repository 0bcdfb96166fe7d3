// Package offload runs a target model's last layers, its final norm and
// its LM head on a device.Device (a GPU, or the host device in tests): the
// part of the target a GPU takes when its memory allows (llama.cpp's -ngl,
// the head first). The CPU target runs the layers before them and hands
// each batch's residual stream over (cpu.Offload); the layers are the
// Llama block of package block, the weights in their stored formats.
package offload

import (
	"errors"
	"fmt"
	"sync"

	"dovetail/block"
	"dovetail/device"
	"dovetail/internal/pending"
	"dovetail/models"
)

// Layers is a target model's last layers [From, L), its final norm and
// its LM head on a device, the weights in their stored formats. The final
// features are made there, where a draft on the same device reads them.
// One Layers serves many sequences (Seq), each with these layers' KV
// cache.
type Layers struct {
	Dev   device.Device
	From  int
	c     models.Config
	shape block.Shape
	freqs []float32 // Llama 3's RoPE frequency factors (nil: none)
	w     []block.Weights
	norm  device.Buffer // final norm
	head  device.Matrix

	// Its sequences' passes, and their making and freeing, go one at a
	// time (parallel slots): they share the device's one stream anyway,
	// and a pass replays as a graph only where no other work comes
	// between its launches.
	pass sync.Mutex
}

// LayerRows is the most rows one pass runs (the CPU's batch).
const LayerRows = 64

// ErrUnsupported says the model has something the device's layer path
// does not run; its message names what.
var ErrUnsupported = errors.New("cannot run on the GPU")

// Check reports why m's layers cannot run on a device (nil: they can):
// the device's RoPE rotates adjacent pairs of whole heads at
// theta^(−2i/d) (divided by Llama 3's factors, device.FreqRoPE, where the
// model has them), and its layers have no biases.
func Check(m *models.Llama) error {
	c := m.Config
	switch {
	case c.RopeStyle != models.RopeNorm:
		return fmt.Errorf("%w: the %s architecture's RoPE (NeoX style)", ErrUnsupported, c.Arch)
	case c.RopeDim != c.HeadDim:
		return fmt.Errorf("%w: RoPE over %d of a head's %d dimensions", ErrUnsupported, c.RopeDim, c.HeadDim)
	case c.RopeScale != 1:
		return fmt.Errorf("%w: linearly scaled RoPE", ErrUnsupported)
	case m.RopeFreqs != nil && len(m.RopeFreqs) < c.HeadDim/2:
		return fmt.Errorf("%w: %d RoPE frequency factors for %d pairs", ErrUnsupported, len(m.RopeFreqs), c.HeadDim/2)
	case c.QKVBias:
		return fmt.Errorf("%w: attention biases", ErrUnsupported)
	}
	return nil
}

// New puts m's layers [from, L), final norm and LM head on dev.
func New(dev device.Device, m *models.Llama, from int) (*Layers, error) {
	return NewWithHead(dev, m, from, nil)
}

// NewWithHead is New with m's LM head already on a device of dev's memory
// (a draft's, which shares the target's head): one copy on the GPU for
// both. nil: New's own copy.
func NewWithHead(dev device.Device, m *models.Llama, from int, head device.Matrix) (_ *Layers, err error) {
	c := m.Config
	if from < 0 || from > c.Layers {
		return nil, fmt.Errorf("offload from layer %d of %d", from, c.Layers)
	}
	if err := Check(m); err != nil {
		return nil, err
	}
	l := &Layers{Dev: dev, From: from, c: c, shape: block.Shape{Hidden: c.Hidden, FFN: c.FFN, Heads: c.Heads,
		KVHeads: c.KVHeads, HeadDim: c.HeadDim, RMSEps: c.RMSEps, RopeTheta: c.RopeTheta}, freqs: m.RopeFreqs}
	defer func() {
		if err != nil {
			l.Free()
		}
	}()
	defer device.Catch(&err)
	vec := func(v []float32) *block.Weight {
		b := dev.Alloc(len(v))
		dev.Upload(b, v)
		return &block.Weight{W: b}
	}
	mat := func(t *models.Tensor) *block.Weight {
		if err != nil {
			return nil
		}
		var mt device.Matrix
		if mt, err = dev.UploadMatrix(t); err != nil {
			err = fmt.Errorf("%w: %v", ErrUnsupported, err)
		}
		return &block.Weight{Q: mt}
	}
	for i := from; i < c.Layers; i++ {
		ly := &m.Layers[i]
		w := block.Weights{AttnNorm: vec(ly.AttnNorm), FFNNorm: vec(ly.FFNNorm),
			Q: mat(ly.Q), K: mat(ly.K), V: mat(ly.V), O: mat(ly.O), Gate: mat(ly.Gate), Up: mat(ly.Up), Down: mat(ly.Down)}
		l.w = append(l.w, w)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
	}
	l.norm = vec(m.OutputNorm).W
	if head != nil {
		if head.Rows() != c.Vocab || head.Cols() != c.Hidden {
			return nil, fmt.Errorf("a shared LM head of %d×%d for %d×%d", head.Rows(), head.Cols(), c.Vocab, c.Hidden)
		}
		l.head = head
		return l, nil
	}
	w := mat(m.Output)
	if err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	l.head = w.Q
	return l, nil
}

// Free releases the norms (matrices are the device's until it closes, as
// a draft's frozen ones are).
func (l *Layers) Free() {
	for _, w := range l.w {
		l.Dev.Free(w.AttnNorm.W)
		l.Dev.Free(w.FFNNorm.W)
	}
	if l.norm != nil {
		l.Dev.Free(l.norm)
	}
	l.w, l.norm = nil, nil
}

// Seq is one sequence's part of Layers: the KV cache of its layers and
// scratch for a pass. It keeps no tree of its own: the CPU side says
// where each pass's keys go and what each row sees, and Commit compacts
// the accepted nodes as the CPU's cache does.
type Seq struct {
	l                               *Layers
	ctx                             int
	kc, vc                          []device.Buffer // per layer: ctx × KVDim (device.AllocKV: halves on a GPU)
	x, xn, q, att, ao, g, u, hh, dn device.Buffer   // LayerRows rows
	k, v                            device.Buffer   // a pass's new keys and values, before the cache takes them
	hid, logits, probs              device.Buffer
}

// NewSeq allocates a sequence of up to ctx positions and pending nodes.
func (l *Layers) NewSeq(ctx int) (_ *Seq, err error) {
	defer device.Catch(&err)
	l.pass.Lock()
	defer l.pass.Unlock()
	dev, c := l.Dev, l.c
	H, KV, F, Q := c.Hidden, c.KVHeads*c.HeadDim, c.FFN, c.Heads*c.HeadDim
	s := &Seq{l: l, ctx: ctx}
	for range l.w {
		s.kc = append(s.kc, device.AllocKV(dev, ctx*KV))
		s.vc = append(s.vc, device.AllocKV(dev, ctx*KV))
	}
	r := LayerRows
	s.k, s.v = dev.Alloc(r*KV), dev.Alloc(r*KV)
	s.x, s.xn, s.q, s.att, s.ao = dev.Alloc(r*H), dev.Alloc(r*H), dev.Alloc(r*Q), dev.Alloc(r*Q), dev.Alloc(r*H)
	s.g, s.u, s.hh, s.dn = dev.Alloc(r*F), dev.Alloc(r*F), dev.Alloc(r*F), dev.Alloc(r*H)
	s.hid, s.logits = dev.Alloc(r*H), dev.Alloc(r*c.Vocab)
	s.probs = dev.Alloc(r * c.Heads * ctx)
	return s, nil
}

// Free releases the sequence's cache and scratch.
func (s *Seq) Free() {
	s.l.pass.Lock()
	defer s.l.pass.Unlock()
	for _, b := range append(append([]device.Buffer{s.x, s.xn, s.q, s.att, s.ao, s.g, s.u, s.hh, s.dn, s.k, s.v, s.hid, s.logits, s.probs}, s.kc...), s.vc...) {
		s.l.Dev.Free(b)
	}
}

// Forward runs n rows of the residual stream x [n×H] (after layer From−1)
// through the layers: new pending nodes at positions pos whose keys go to
// slots past+base …, after past committed positions and base pending
// nodes; mask [n × (base+n)] says which pending nodes each row sees (nil:
// causal). It writes every row's final feature to hidden [n×H] and the
// logits of rows [logitsFrom, n) to logits.
func (s *Seq) Forward(x []float32, n int, pos []int, past, base int, mask []uint8, logitsFrom int, hidden, logits []float32) (err error) {
	defer device.Catch(&err)
	l, dev, c := s.l, s.l.Dev, s.l.c
	l.pass.Lock()
	defer l.pass.Unlock()
	H, KV, Q, F := c.Hidden, c.KVHeads*c.HeadDim, c.Heads*c.HeadDim, c.FFN
	m := base + n
	switch {
	case n < 1 || n > LayerRows || len(x) < n*H || len(pos) < n || len(hidden) < n*H:
		return fmt.Errorf("offloaded layers: a pass of %d rows (at most %d)", n, LayerRows)
	case past+m > s.ctx:
		return fmt.Errorf("offloaded layers: context full: %d + %d > %d", past, m, s.ctx)
	case mask != nil && len(mask) < n*m:
		return fmt.Errorf("offloaded layers: mask of %d for %d × %d", len(mask), n, m)
	}
	v := func(b device.Buffer, w int) device.Buffer { return dev.View(b, 0, n*w) }
	xb := v(s.x, H)
	dev.Upload(xb, x[:n*H])
	at := &cacheAttn{s: s, slot: past + base, a: device.Attn{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Past: past, Pend: m, Rows: n, Mask: mask}}
	// One set of scratch for every layer, nothing kept for a backward
	// pass: the normed inputs share a buffer, and the residual stream is
	// updated in place.
	a := block.Acts{XN: v(s.xn, H), Q: v(s.q, Q), Att: v(s.att, Q), Probs: dev.View(s.probs, 0, n*c.Heads*(past+m)),
		AO: v(s.ao, H), Mid: xb, XN2: v(s.xn, H), G: v(s.g, F), U: v(s.u, F), HH: v(s.hh, F), DN: v(s.dn, H), Out: xb,
		K: v(s.k, KV), V: v(s.v, KV)}
	p := block.Pass{Dev: dev, Shape: l.shape, N: n, Pos: pos[:n], Attn: at, Frozen: true, RopeFreqs: l.freqs}
	hid := v(s.hid, H)
	// A step of n rows is the same launches every time but for a few
	// values (positions, the cache slot): a GPU replays them as a graph.
	device.Graphed(dev, graphKey{s, n, mask != nil}, func() {
		for i := range l.w {
			p.Forward(i, &l.w[i], &a, xb)
		}
		dev.RMSNorm(hid, xb, l.norm, n, H, c.RMSEps)
	})
	dev.Download(hidden[:n*H], hid)
	if rows := n - logitsFrom; rows > 0 {
		V := c.Vocab
		lg := dev.View(s.logits, 0, rows*V)
		dev.MatMulFrozen(lg, dev.View(s.hid, logitsFrom*H, rows*H), l.head, rows)
		dev.Download(logits[:rows*V], lg)
	}
	return nil
}

// graphKey names a sequence's passes of one shape, for device.Graphed.
type graphKey struct {
	s      *Seq
	n      int
	masked bool
}

// cacheAttn is a pass's attention: the pass's keys and values go to the
// cache's slots from slot on, then its rows attend to the committed keys
// in the cache and the pending nodes, as the mask says.
type cacheAttn struct {
	s    *Seq
	slot int
	a    device.Attn
}

func (c *cacheAttn) Attend(i int, a *block.Acts) {
	kv := c.a.KVHeads * c.a.HeadDim
	keys := c.a.Keys() * kv
	dev := c.s.l.Dev
	device.StoreKVPair(dev, dev.View(c.s.kc[i], c.slot*kv, a.K.Len()), a.K, dev.View(c.s.vc[i], c.slot*kv, a.V.Len()), a.V)
	dev.Attention(a.Att, a.Probs, a.Q, dev.View(c.s.kc[i], 0, keys), dev.View(c.s.vc[i], 0, keys), c.a)
}

func (c *cacheAttn) AttendBackward(int, *block.Acts, device.Buffer, device.Buffer, device.Buffer, device.Buffer) {
	panic("offload: the target's layers have no backward pass")
}

// Commit moves the keys and values of the accepted pending nodes (path,
// indices among the pending nodes after past committed positions) to the
// slots after the committed ones, as the CPU side does with its own.
func (s *Seq) Commit(past int, path []int) (err error) {
	defer device.Catch(&err)
	for k, p := range path {
		if p < k || past+p >= s.ctx {
			return fmt.Errorf("offloaded layers: commit node %d as the path's %d", p, k)
		}
	}
	dev, c := s.l.Dev, s.l.c
	s.l.pass.Lock()
	defer s.l.pass.Unlock()
	KV := c.KVHeads * c.HeadDim
	pending.Moves(path, func(to, from int) {
		for i := range s.kc {
			dev.Copy(dev.View(s.kc[i], (past+to)*KV, KV), dev.View(s.kc[i], (past+from)*KV, KV))
			dev.Copy(dev.View(s.vc[i], (past+to)*KV, KV), dev.View(s.vc[i], (past+from)*KV, KV))
		}
	})
	return nil
}

// Measure is what New(m, from) and seqs sequences of ctx positions hold
// on a GPU (onGPU) or the host, counted on a device that only counts.
func Measure(m *models.Llama, from, ctx, seqs int, onGPU bool) (uint64, error) {
	s := device.NewCounter(onGPU)
	l, err := New(s, m, from)
	if err != nil {
		return 0, err
	}
	for range seqs {
		if _, err := l.NewSeq(ctx); err != nil {
			return 0, err
		}
	}
	return s.Held(), nil
}
