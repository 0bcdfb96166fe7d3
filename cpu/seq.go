package cpu

import (
	"fmt"
	"math"
	"runtime"
	"time"

	"dovetail/cpu/kernels"
	"dovetail/internal/pending"
	"dovetail/models"
	"dovetail/quant"
)

// Seq is one sequence of a Fast model: its KV cache, the pending tree
// nodes after the committed positions, and scratch memory for batches.
type Seq struct {
	f       *Fast
	cache   KVCache
	kvDim   int
	len     int // committed positions
	pending pending.Tree

	rows                   int // scratch capacity in rows
	x, xb, hb, hb2, kk, vv []float32
	qAll, attOut           []float32 // rows of every pending node
	hidden, logits         []float32
	mask                   []uint8
	pos                    []int       // positions of the batch's rows
	scratch                [][]float32 // attention, one per pool chunk
	act                    actBuf
	off                    OffloadSeq // the offloaded layers' part, or nil
	aux                    []int      // Target.ExportLayers' layers, or nil
	feat                   []float32  // their rows, 3·Hidden wide
	yielded                time.Time  // see yield
}

// NewSeq allocates a sequence with an empty cache: the CPU layers' here,
// the offloaded ones' on their device (which may be out of memory).
func (f *Fast) NewSeq() (*Seq, error) {
	c := f.M.Config
	s := &Seq{f: f, kvDim: c.KVHeads * c.HeadDim}
	s.cache = newKVCache(f.cpuLayers(), s.kvDim, f.ctx)
	if f.off != nil {
		var err error
		if s.off, err = f.off.NewSeq(f.ctx); err != nil {
			return nil, fmt.Errorf("layers %d to %d on the GPU: %w", f.off.From, c.Layers-1, err)
		}
	}
	return s, nil
}

// Free releases what the sequence holds on another device.
func (s *Seq) Free() {
	if s.off != nil {
		s.off.Free()
		s.off = nil
	}
}

// grow makes scratch room for n new rows among m pending ones.
func (s *Seq) grow(n, m int) {
	c := s.f.M.Config
	if n > s.rows {
		s.rows = n
		s.x = make([]float32, n*c.Hidden)
		s.xb = make([]float32, n*max(c.Hidden, c.FFN))
		s.hb = make([]float32, n*c.FFN)
		s.hb2 = make([]float32, n*c.FFN)
		s.kk = make([]float32, n*s.kvDim)
		s.vv = make([]float32, n*s.kvDim)
		s.hidden = make([]float32, n*c.Hidden)
		s.logits = nil
		s.act = newActBuf(s.f.K, n*max(c.Hidden, c.FFN))
	}
	if m*c.Hidden > len(s.qAll) {
		s.qAll = make([]float32, m*c.Hidden)
		s.attOut = make([]float32, m*c.Hidden)
	}
	if m*m > len(s.mask) {
		s.mask = make([]uint8, m*m)
	}
	need := kernels.AttentionScratch(s.len, m)
	if len(s.scratch) < s.f.pool.Threads() || len(s.scratch[0]) < need {
		s.scratch = make([][]float32, s.f.pool.Threads())
		for i := range s.scratch {
			s.scratch[i] = make([]float32, max(need, 64))
		}
	}
}

// batch is one pass's rows: n new pending nodes after base earlier ones,
// m in all, each row's mask row m wide (the new rows' are the last n).
type batch struct {
	n, base, m int
	mask       []uint8
}

// forward runs tokens as new pending nodes with the given parents (see
// Target.Extend) in one pass. Logits are computed for rows [logitsFrom,
// n); hidden states for every row. The CPU's layers are the same Llama
// block the other devices run once (package block), written here against
// the kernels: the pass's layout of rows and its threads are where the
// CPU's speed comes from.
func (s *Seq) forward(tokens, parents []int, logitsFrom int) error {
	f, c := s.f, s.f.M.Config
	b, err := s.addNodes(tokens, parents)
	if err != nil {
		return err
	}
	H := c.Hidden
	x := s.x[:b.n*H]
	for i, tok := range tokens {
		if err := quant.DequantizeRow(f.M.TokenEmbd.Type, x[i*H:(i+1)*H], f.M.TokenEmbd.Row(tok)); err != nil {
			return err
		}
	}
	for l := range f.cpuLayers() {
		s.yield()
		s.capture(l, b.n, x)
		s.attention(l, b, x)
		s.mlp(l, b.n, x)
	}
	s.capture(f.cpuLayers(), b.n, x) // the first offloaded layer's input
	hidden := s.hidden[:b.n*H]
	if logitsFrom < b.n && len(s.logits) < s.rows*c.Vocab {
		s.logits = make([]float32, s.rows*c.Vocab)
	}
	if s.off != nil {
		// The rest runs on the other device: the new rows' mask rows
		// are the last n of the pending nodes'.
		return s.off.Forward(x, b.n, s.pos, s.len, b.base, b.mask[b.base*b.m:], logitsFrom, hidden, s.logits)
	}
	f.K.RMSNorm(hidden, x, f.M.OutputNorm, b.n, H, c.RMSEps)
	if logitsFrom < b.n {
		rows := b.n - logitsFrom
		s.act.set(hidden[logitsFrom*H:], rows, H)
		f.matmul(s.logits[:rows*c.Vocab], f.M.Output, &s.act)
	}
	return nil
}

// addNodes checks a pass's nodes and adds them to the pending tree: their
// positions in s.pos, their mask rows, scratch for the pass.
func (s *Seq) addNodes(tokens, parents []int) (batch, error) {
	f, c := s.f, s.f.M.Config
	n, base := len(tokens), s.pending.Len()
	if len(parents) != n {
		return batch{}, fmt.Errorf("extend: %d tokens but %d parents", n, len(parents))
	}
	if s.len+base+n > f.ctx {
		return batch{}, fmt.Errorf("context full: %d committed + %d tree nodes > %d", s.len, base+n, f.ctx)
	}
	if err := s.pending.Check(parents); err != nil {
		return batch{}, err
	}
	for _, tok := range tokens {
		if tok < 0 || tok >= c.Vocab {
			return batch{}, fmt.Errorf("token %d out of vocabulary range [0, %d)", tok, c.Vocab)
		}
	}
	m := base + n
	s.grow(n, m)
	s.pos = s.pending.Add(parents, s.len, s.pos[:0])
	// Mask rows of the new nodes: each sees its pending ancestors and itself.
	mask := s.mask[:m*m]
	s.pending.MaskRows(mask[base*m:], base)
	return batch{n: n, base: base, m: m, mask: mask}, nil
}

// attention is layer l's attention over the pass's rows of x: the new
// nodes' keys and values into the cache, x += O·attention.
func (s *Seq) attention(l int, b batch, x []float32) {
	f, c := s.f, s.f.M.Config
	w := &f.M.Layers[l]
	H, hd, n := c.Hidden, c.HeadDim, b.n
	xb := s.xb[:n*H]
	f.K.RMSNorm(xb, x, w.AttnNorm, n, H, c.RMSEps)
	s.act.set(xb, n, H)
	q := s.qAll[b.base*H : b.m*H]
	f.matmul(q, w.Q, &s.act)
	f.matmul(s.kk[:n*s.kvDim], w.K, &s.act)
	f.matmul(s.vv[:n*s.kvDim], w.V, &s.act)
	neox := c.RopeStyle == models.RopeNeox
	for i := 0; i < n; i++ {
		qi, ki, vi := q[i*H:(i+1)*H], s.kk[i*s.kvDim:(i+1)*s.kvDim], s.vv[i*s.kvDim:(i+1)*s.kvDim]
		if c.QKVBias {
			add(qi, w.QBias)
			add(ki, w.KBias)
			add(vi, w.VBias)
		}
		cos, sin := f.rope.at(s.pos[i])
		f.K.RoPE(qi, c.Heads, hd, f.rope.pairs, neox, cos, sin)
		f.K.RoPE(ki, c.KVHeads, hd, f.rope.pairs, neox, cos, sin)
		kc, vc := s.cache.slot(l, s.len+b.base+i)
		f.K.ToF16(kc, ki)
		f.K.ToF16(vc, vi)
	}
	s.attend(l, b)
	s.act.set(s.attOut[b.base*H:b.m*H], n, H)
	f.matmul(xb, w.O, &s.act)
	add(x, xb)
}

// attend runs layer l's attention of the pass's queries over the cache
// into s.attOut.
func (s *Seq) attend(l int, b batch) {
	f, c := s.f, s.f.M.Config
	hd := c.HeadDim
	scale := float32(1 / math.Sqrt(float64(hd)))
	kc, vc := s.cache.first(l, s.len+b.m)
	if f.alone(4 * len(kc) * b.n) { // f16 keys and values
		f.K.Attention(s.attOut, s.qAll, kc, vc, s.len, b.m, b.mask, c.Heads, c.KVHeads, hd, scale, b.base, b.base+b.n, s.scratch[0])
	} else if th := f.pool.cThreads(f.K); th != nil {
		// On the threads that run the products (a decode row split by
		// heads): Go workers woken here would wait for the CPU those
		// threads spin on.
		th.Attention(s.attOut, s.qAll, kc, vc, s.len, b.m, b.mask, c.Heads, c.KVHeads, hd, scale, b.base, b.base+b.n, s.scratch[0])
	} else {
		f.pool.ForChunks(b.n, func(ch, lo, hi int) {
			f.K.Attention(s.attOut, s.qAll, kc, vc, s.len, b.m, b.mask, c.Heads, c.KVHeads, hd, scale, b.base+lo, b.base+hi, s.scratch[ch])
		})
	}
}

// mlp is layer l's SwiGLU block over the pass's n rows of x.
func (s *Seq) mlp(l, n int, x []float32) {
	f, c := s.f, s.f.M.Config
	w := &f.M.Layers[l]
	H := c.Hidden
	xb := s.xb[:n*H]
	f.K.RMSNorm(xb, x, w.FFNNorm, n, H, c.RMSEps)
	s.act.set(xb, n, H)
	hb, hb2 := s.hb[:n*c.FFN], s.hb2[:n*c.FFN]
	f.matmul(hb, w.Gate, &s.act)
	f.matmul(hb2, w.Up, &s.act)
	f.K.SiLUMul(hb, hb, hb2)
	s.act.set(hb, n, c.FFN)
	f.matmul(xb, w.Down, &s.act)
	add(x, xb)
}

// yieldEvery bounds how long a forward pass runs without yielding: see
// Seq.yield.
const yieldEvery = 4 * time.Millisecond

// yield lets the Go scheduler see the goroutine reschedule every yieldEvery.
// A forward pass spends its time in calls into C, which the scheduler counts
// as system calls; one that runs 10 ms on one scheduling tick gets its P
// retaken by sysmon every 20 µs for as long as it goes on (runtime.retake),
// waking runtime threads onto the cores the kernels' threads spin and stream
// on (docs/measurements/kernels-attention-threads.md, "The Go scheduler
// during a forward pass").
func (s *Seq) yield() {
	if now := time.Now(); now.Sub(s.yielded) >= yieldEvery {
		runtime.Gosched()
		s.yielded = now
	}
}

// commit keeps the pending nodes on path (a chain, see pending.Tree) as
// the next committed positions, here and on the offloaded layers' device.
func (s *Seq) commit(path []int) error {
	if s.off != nil {
		// Checked before the other device moves its rows by it.
		if err := s.pending.CheckPath(path); err != nil {
			return err
		}
		if err := s.off.Commit(s.len, path); err != nil {
			return err
		}
	}
	if err := s.pending.Commit(path, func(to, from int) { s.cache.move(s.len+to, s.len+from) }); err != nil {
		return err
	}
	s.len += len(path)
	return nil
}

// add: dst += x.
func add(dst, x []float32) {
	for i := range dst {
		dst[i] += x[i]
	}
}
