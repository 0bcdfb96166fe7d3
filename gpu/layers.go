package gpu

import (
	"errors"
	"fmt"

	"dovetail/models"
)

// Layers is a target model's last layers [From, L), its final norm and
// its LM head on a device, the weights in their stored formats: the part
// of the target a GPU runs when its memory allows (llama.cpp's -ngl, the
// head first). The CPU runs the layers before From and hands each batch's
// residual stream over; the final features are then made where a draft on
// the same device reads them. One Layers serves many sequences
// (LayerSeq), each with these layers' KV cache.
type Layers struct {
	Dev  Device
	From int
	c    models.Config
	w    []layerWeights
	norm Buffer // final norm
	head Matrix
}

type layerWeights struct {
	attnNorm, ffnNorm          Buffer
	q, k, v, o, gate, up, down Matrix
}

// layerRows is the most rows one pass runs (the CPU's batch).
const layerRows = 64

// ErrCannotOffload says the model has something the device's layer path
// does not run; its message names what.
var ErrCannotOffload = errors.New("cannot run on the GPU")

// CanOffload reports why m's layers cannot run on a device (nil: they
// can): the device's RoPE rotates adjacent pairs of whole heads at
// theta^(−2i/d), and its layers have no biases.
func CanOffload(m *models.Llama) error {
	c := m.Config
	switch {
	case c.RopeStyle != models.RopeNorm:
		return fmt.Errorf("%w: the %s architecture's RoPE (NeoX style)", ErrCannotOffload, c.Arch)
	case c.RopeDim != c.HeadDim:
		return fmt.Errorf("%w: RoPE over %d of a head's %d dimensions", ErrCannotOffload, c.RopeDim, c.HeadDim)
	case c.RopeScale != 1 || m.RopeFreqs != nil:
		return fmt.Errorf("%w: scaled RoPE (long-context frequencies)", ErrCannotOffload)
	case c.QKVBias:
		return fmt.Errorf("%w: attention biases", ErrCannotOffload)
	}
	return nil
}

// NewLayers puts m's layers [from, L), final norm and LM head on dev.
func NewLayers(dev Device, m *models.Llama, from int) (_ *Layers, err error) {
	c := m.Config
	if from < 0 || from > c.Layers {
		return nil, fmt.Errorf("offload from layer %d of %d", from, c.Layers)
	}
	if err := CanOffload(m); err != nil {
		return nil, err
	}
	l := &Layers{Dev: dev, From: from, c: c}
	defer func() {
		if err != nil {
			l.Free()
		}
	}()
	defer catchDevice(&err)
	vec := func(v []float32) Buffer {
		b := dev.Alloc(len(v))
		dev.Upload(b, v)
		return b
	}
	mat := func(t *models.Tensor) Matrix {
		if err != nil {
			return nil
		}
		var mt Matrix
		if mt, err = dev.UploadMatrix(t); err != nil {
			err = fmt.Errorf("%w: %v", ErrCannotOffload, err)
		}
		return mt
	}
	for i := from; i < c.Layers; i++ {
		ly := &m.Layers[i]
		w := layerWeights{attnNorm: vec(ly.AttnNorm), ffnNorm: vec(ly.FFNNorm),
			q: mat(ly.Q), k: mat(ly.K), v: mat(ly.V), o: mat(ly.O), gate: mat(ly.Gate), up: mat(ly.Up), down: mat(ly.Down)}
		l.w = append(l.w, w)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
	}
	l.norm = vec(m.OutputNorm)
	if l.head = mat(m.Output); err != nil {
		return nil, fmt.Errorf("output: %w", err)
	}
	return l, nil
}

// Free releases the norms (matrices are the device's until it closes, as
// a draft's frozen ones are).
func (l *Layers) Free() {
	for _, w := range l.w {
		l.Dev.Free(w.attnNorm)
		l.Dev.Free(w.ffnNorm)
	}
	if l.norm != nil {
		l.Dev.Free(l.norm)
	}
	l.w, l.norm = nil, nil
}

// LayerSeq is one sequence's part of Layers: the KV cache of its layers
// and scratch for a pass. It keeps no positions of its own: the CPU side
// says where each pass's keys go, and Commit compacts accepted nodes.
type LayerSeq struct {
	l                               *Layers
	ctx                             int
	kc, vc                          []Buffer // per layer: ctx × KVDim
	x, xn, q, att, ao, g, u, hh, dn Buffer   // layerRows rows
	hid, logits, probs              Buffer
}

// NewSeq allocates a sequence of up to ctx positions and pending nodes.
func (l *Layers) NewSeq(ctx int) (_ *LayerSeq, err error) {
	defer catchDevice(&err)
	dev, c := l.Dev, l.c
	H, KV, F, Q := c.Hidden, c.KVHeads*c.HeadDim, c.FFN, c.Heads*c.HeadDim
	s := &LayerSeq{l: l, ctx: ctx}
	for range l.w {
		s.kc = append(s.kc, dev.Alloc(ctx*KV))
		s.vc = append(s.vc, dev.Alloc(ctx*KV))
	}
	r := layerRows
	s.x, s.xn, s.q, s.att, s.ao = dev.Alloc(r*H), dev.Alloc(r*H), dev.Alloc(r*Q), dev.Alloc(r*Q), dev.Alloc(r*H)
	s.g, s.u, s.hh, s.dn = dev.Alloc(r*F), dev.Alloc(r*F), dev.Alloc(r*F), dev.Alloc(r*H)
	s.hid, s.logits = dev.Alloc(r*H), dev.Alloc(r*c.Vocab)
	s.probs = dev.Alloc(r * c.Heads * ctx)
	return s, nil
}

// Free releases the sequence's cache and scratch.
func (s *LayerSeq) Free() {
	for _, b := range append(append([]Buffer{s.x, s.xn, s.q, s.att, s.ao, s.g, s.u, s.hh, s.dn, s.hid, s.logits, s.probs}, s.kc...), s.vc...) {
		s.l.Dev.Free(b)
	}
}

// Forward runs n rows of the residual stream x [n×H] (after layer From−1)
// through the layers: new pending nodes at positions pos whose keys go to
// slots past+base …, after past committed positions and base pending
// nodes; mask [n × (base+n)] says which pending nodes each row sees (nil:
// causal). It writes every row's final feature to hidden [n×H] and the
// logits of rows [logitsFrom, n) to logits.
func (s *LayerSeq) Forward(x []float32, n int, pos []int, past, base int, mask []uint8, logitsFrom int, hidden, logits []float32) (err error) {
	defer catchDevice(&err)
	l, dev, c := s.l, s.l.Dev, s.l.c
	H, KV, Q := c.Hidden, c.KVHeads*c.HeadDim, c.Heads*c.HeadDim
	m := base + n
	switch {
	case n < 1 || n > layerRows || len(x) < n*H || len(pos) < n || len(hidden) < n*H:
		return fmt.Errorf("offloaded layers: a pass of %d rows (at most %d)", n, layerRows)
	case past+m > s.ctx:
		return fmt.Errorf("offloaded layers: context full: %d + %d > %d", past, m, s.ctx)
	case mask != nil && len(mask) < n*m:
		return fmt.Errorf("offloaded layers: mask of %d for %d × %d", len(mask), n, m)
	}
	v := func(b Buffer, w int) Buffer { return dev.View(b, 0, n*w) }
	xb := v(s.x, H)
	dev.Upload(xb, x[:n*H])
	at := Attn{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Past: past, Pend: m, Rows: n, Mask: mask}
	for i, w := range l.w {
		dev.RMSNorm(v(s.xn, H), xb, w.attnNorm, n, H, c.RMSEps)
		k, vv := dev.View(s.kc[i], (past+base)*KV, n*KV), dev.View(s.vc[i], (past+base)*KV, n*KV)
		dev.MatMulFrozen(v(s.q, Q), v(s.xn, H), w.q, n)
		dev.MatMulFrozen(k, v(s.xn, H), w.k, n)
		dev.MatMulFrozen(vv, v(s.xn, H), w.v, n)
		dev.RoPE(v(s.q, Q), pos[:n], c.Heads, c.HeadDim, c.RopeTheta)
		dev.RoPE(k, pos[:n], c.KVHeads, c.HeadDim, c.RopeTheta)
		keys := (past + m) * KV
		dev.Attention(v(s.att, Q), dev.View(s.probs, 0, n*c.Heads*(past+m)), v(s.q, Q),
			dev.View(s.kc[i], 0, keys), dev.View(s.vc[i], 0, keys), at)
		dev.MatMulFrozen(v(s.ao, H), v(s.att, Q), w.o, n)
		dev.Add(xb, xb, v(s.ao, H))
		dev.RMSNorm(v(s.xn, H), xb, w.ffnNorm, n, H, c.RMSEps)
		dev.MatMulFrozen(v(s.g, c.FFN), v(s.xn, H), w.gate, n)
		dev.MatMulFrozen(v(s.u, c.FFN), v(s.xn, H), w.up, n)
		dev.SwiGLU(v(s.hh, c.FFN), v(s.g, c.FFN), v(s.u, c.FFN))
		dev.MatMulFrozen(v(s.dn, H), v(s.hh, c.FFN), w.down, n)
		dev.Add(xb, xb, v(s.dn, H))
	}
	hid := v(s.hid, H)
	dev.RMSNorm(hid, xb, l.norm, n, H, c.RMSEps)
	dev.Download(hidden[:n*H], hid)
	if rows := n - logitsFrom; rows > 0 {
		V := c.Vocab
		lg := dev.View(s.logits, 0, rows*V)
		dev.MatMulFrozen(lg, dev.View(s.hid, logitsFrom*H, rows*H), l.head, rows)
		dev.Download(logits[:rows*V], lg)
	}
	return nil
}

// Commit moves the keys and values of the accepted pending nodes (path,
// indices among the pending nodes after past committed positions) to the
// slots after the committed ones, as the CPU side does with its own.
func (s *LayerSeq) Commit(past int, path []int) (err error) {
	defer catchDevice(&err)
	dev, c := s.l.Dev, s.l.c
	KV := c.KVHeads * c.HeadDim
	for k, p := range path {
		if p == k {
			continue
		}
		if p < k || past+p >= s.ctx {
			return fmt.Errorf("offloaded layers: commit node %d as the path's %d", p, k)
		}
		for i := range s.kc {
			dev.Copy(dev.View(s.kc[i], (past+k)*KV, KV), dev.View(s.kc[i], (past+p)*KV, KV))
			dev.Copy(dev.View(s.vc[i], (past+k)*KV, KV), dev.View(s.vc[i], (past+p)*KV, KV))
		}
	}
	return nil
}

// MeasureLayers is what NewLayers(m, from) and seqs sequences of ctx
// positions hold on a GPU (onGPU) or the host, counted on a device that
// only counts.
func MeasureLayers(m *models.Llama, from, ctx, seqs int, onGPU bool) (uint64, error) {
	s := &sizer{gpu: onGPU}
	l, err := NewLayers(s, m, from)
	if err != nil {
		return 0, err
	}
	for range seqs {
		if _, err := l.NewSeq(ctx); err != nil {
			return 0, err
		}
	}
	return s.held, nil
}
