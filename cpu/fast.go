package cpu

import (
	"fmt"
	"math"
	"runtime"
	"time"

	"dovetail/cpu/kernels"
	"dovetail/models"
	"dovetail/quant"
)

// maxBatch bounds the rows of one pass: a prompt runs in chunks of this
// many tokens, which keeps scratch memory and the attention mask small
// while every weight is still read once per 64 rows.
const maxBatch = 64

// Fast runs a llama-family model with the kernels of a kernels.Set. Each
// pass runs a batch of rows — prompt tokens, the nodes of a draft tree, or
// one decode token — reading every weight matrix once for all of them, so
// verifying γ tree nodes costs far less than γ decode steps.
//
// It does what Reference does, in the same order and with the same
// roundings (f16 KV cache, f16 attention weights, int8 activations for
// int8 weights); only the float summation order inside the kernels
// differs.
type Fast struct {
	M      *models.Llama
	K      *kernels.Set
	pool   *Pool
	rope   *ropeTable
	ctx    int
	packed map[*models.Tensor]*kernels.Packed // the matrices K packs
	off    *Offload                           // nil: every layer here
}

// Offload is the part of a model another device runs (gpu.Layers): its
// layers from From on, its final norm and LM head. Package cpu names no
// device: the runner wires one in.
type Offload struct {
	From int
	// NewSeq makes one sequence's part there, of ctx positions.
	NewSeq func(ctx int) (OffloadSeq, error)
}

// OffloadSeq is one sequence's offloaded layers with their KV cache (see
// gpu.LayerSeq): Forward takes a batch's residual stream after layer
// From−1 with the batch's positions and tree mask and gives back its final
// features and logits; Commit compacts accepted nodes as Seq.commit does.
type OffloadSeq interface {
	Forward(x []float32, n int, pos []int, past, base int, mask []uint8, logitsFrom int, hidden, logits []float32) error
	Commit(past int, path []int) error
	Free()
}

// NewFast prepares m for sequences of ctx positions (≤ 0: the model's
// context length; more than it is allowed, as llama.cpp allows it: the
// caller warns that the model was not trained that far).
func NewFast(m *models.Llama, k *kernels.Set, pool *Pool, ctx int) *Fast {
	return NewFastOffload(m, k, pool, ctx, nil)
}

// NewFastOffload is NewFast with the layers from off.From on, the final
// norm and the LM head run by off (nil: none): only the layers before it
// are packed, and sequences keep caches for those only.
func NewFastOffload(m *models.Llama, k *kernels.Set, pool *Pool, ctx int, off *Offload) *Fast {
	if ctx <= 0 {
		ctx = m.Config.ContextLength
	}
	f := &Fast{M: m, K: k, pool: pool, rope: newRopeTable(m.Config, m.RopeFreqs, ctx), ctx: ctx, off: off}
	f.pack()
	return f
}

// cpuLayers is the number of layers the CPU runs.
func (f *Fast) cpuLayers() int {
	if f.off != nil {
		return f.off.From
	}
	return len(f.M.Layers)
}

// WithPool is f on another pool, sharing f's packed weights and tables
// rather than packing the model again: a server's slots each have a pool
// of their own, and one packed copy of a large model is already as big as
// its file.
func (f *Fast) WithPool(pool *Pool) *Fast {
	g := *f
	g.pool = pool
	return &g
}

// pack copies the matrices the kernels multiply faster in their own layout
// (see kernels.Packed), on the pool's workers. The packed copies take as
// much memory as the matrices; the originals are evicted from a
// memory-mapped file (read back should anything touch them again).
func (f *Fast) pack() {
	var ts []*models.Tensor
	for i := range f.cpuLayers() {
		l := &f.M.Layers[i]
		ts = append(ts, l.Q, l.K, l.V, l.O, l.Gate, l.Up, l.Down)
	}
	if f.off == nil {
		ts = append(ts, f.M.Output)
	}
	ps := make([]*kernels.Packed, len(ts))
	f.pool.For(len(ts), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			t := ts[i]
			// The forward pass reads the copy only, so the file's pages
			// need not stay in memory beside it (unless the matrix doubles
			// as the token embedding, whose rows are still read): each
			// piece is evicted once copied, so that a large matrix is not
			// resident twice while it packs.
			var done func(lo, hi int)
			if t != f.M.TokenEmbd && f.M.File != nil {
				done = func(lo, hi int) { f.M.File.Evict(t.Data[lo*t.RowBytes : min(hi*t.RowBytes, len(t.Data))]) }
			}
			ps[i] = f.K.PackEach(t.Type, t.Data, t.RowBytes, t.Rows, t.Cols, done)
		}
	})
	for i, p := range ps {
		if p == nil {
			continue
		}
		if f.packed == nil {
			f.packed = map[*models.Tensor]*kernels.Packed{}
		}
		f.packed[ts[i]] = p
	}
}

// Seq is one sequence of a Fast model: its f16 KV cache, the pending tree
// nodes after the committed positions, and scratch memory for batches.
type Seq struct {
	f       *Fast
	k, v    [][]uint16 // [layer][slot*kvDim + i]
	kvDim   int
	len     int // committed positions
	pending []treeNode

	rows                   int // scratch capacity in rows
	x, xb, hb, hb2, kk, vv []float32
	qAll, attOut           []float32 // rows of every pending node
	hidden, logits         []float32
	mask                   []uint8
	pos                    []int       // positions of the batch's rows
	scratch                [][]float32 // attention, one per pool chunk
	act                    actBuf
	off                    OffloadSeq // the offloaded layers' part, or nil
	yielded                time.Time  // see yield
}

// NewSeq allocates a sequence with an empty cache: the CPU layers' here,
// the offloaded ones' on their device (which may be out of memory).
func (f *Fast) NewSeq() (*Seq, error) {
	c := f.M.Config
	L := f.cpuLayers()
	s := &Seq{f: f, kvDim: c.KVHeads * c.HeadDim, k: make([][]uint16, L), v: make([][]uint16, L)}
	for l := range s.k {
		s.k[l] = make([]uint16, f.ctx*s.kvDim)
		s.v[l] = make([]uint16, f.ctx*s.kvDim)
	}
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

// forward runs tokens as new pending nodes with the given parents (see
// Reference.Extend) in one pass. Logits are computed for rows [logitsFrom,
// n); hidden states for every row.
func (s *Seq) forward(tokens, parents []int, logitsFrom int) error {
	f, c := s.f, s.f.M.Config
	n, base := len(tokens), len(s.pending)
	if len(parents) != n {
		return fmt.Errorf("extend: %d tokens but %d parents", n, len(parents))
	}
	if s.len+base+n > f.ctx {
		return fmt.Errorf("context full: %d committed + %d tree nodes > %d", s.len, base+n, f.ctx)
	}
	for i, p := range parents {
		if p < -1 || p >= base+i {
			return fmt.Errorf("extend: node %d has parent %d, want -1 or an earlier node", base+i, p)
		}
		if tokens[i] < 0 || tokens[i] >= c.Vocab {
			return fmt.Errorf("token %d out of vocabulary range [0, %d)", tokens[i], c.Vocab)
		}
	}
	m := base + n
	s.grow(n, m)
	pos := s.pos[:0]
	for _, p := range parents {
		depth := 0
		if p >= 0 {
			depth = s.pending[p].depth + 1
		}
		s.pending = append(s.pending, treeNode{parent: p, depth: depth})
		pos = append(pos, s.len+depth)
	}
	s.pos = pos
	// Mask rows of the new nodes: each sees its pending ancestors and itself.
	mask := s.mask[:m*m]
	for j := base; j < m; j++ {
		row := mask[j*m : (j+1)*m]
		clear(row)
		for a := j; a >= 0; a = s.pending[a].parent {
			row[a] = 1
		}
	}
	H, hd := c.Hidden, c.HeadDim
	x := s.x[:n*H]
	for i, tok := range tokens {
		if err := quant.DequantizeRow(f.M.TokenEmbd.Type, x[i*H:(i+1)*H], f.M.TokenEmbd.Row(tok)); err != nil {
			return err
		}
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	xb := s.xb[:n*H]
	for l := range f.cpuLayers() {
		s.yield()
		w := &f.M.Layers[l]
		f.K.RMSNorm(xb, x, w.AttnNorm, n, H, c.RMSEps)
		s.act.set(xb, n, H)
		q := s.qAll[base*H : m*H]
		f.matmul(q, w.Q, &s.act)
		f.matmul(s.kk[:n*s.kvDim], w.K, &s.act)
		f.matmul(s.vv[:n*s.kvDim], w.V, &s.act)
		for i := 0; i < n; i++ {
			qi, ki, vi := q[i*H:(i+1)*H], s.kk[i*s.kvDim:(i+1)*s.kvDim], s.vv[i*s.kvDim:(i+1)*s.kvDim]
			if c.QKVBias {
				add(qi, w.QBias)
				add(ki, w.KBias)
				add(vi, w.VBias)
			}
			cos, sin := f.rope.at(pos[i])
			f.K.RoPE(qi, c.Heads, hd, f.rope.pairs, c.RopeStyle == models.RopeNeox, cos, sin)
			f.K.RoPE(ki, c.KVHeads, hd, f.rope.pairs, c.RopeStyle == models.RopeNeox, cos, sin)
			slot := s.len + base + i
			f.K.ToF16(s.k[l][slot*s.kvDim:(slot+1)*s.kvDim], ki)
			f.K.ToF16(s.v[l][slot*s.kvDim:(slot+1)*s.kvDim], vi)
		}
		kc, vc := s.k[l][:(s.len+m)*s.kvDim], s.v[l][:(s.len+m)*s.kvDim]
		if alone(4 * len(kc) * n) { // f16 keys and values
			f.K.Attention(s.attOut, s.qAll, kc, vc, s.len, m, mask, c.Heads, c.KVHeads, hd, scale, base, base+n, s.scratch[0])
		} else if th := f.pool.cThreads(f.K); th != nil {
			// On the threads that run the products (a decode row split by
			// heads): Go workers woken here would wait for the CPU those
			// threads spin on.
			th.Attention(s.attOut, s.qAll, kc, vc, s.len, m, mask, c.Heads, c.KVHeads, hd, scale, base, base+n, s.scratch[0])
		} else {
			f.pool.ForChunks(n, func(ch, lo, hi int) {
				f.K.Attention(s.attOut, s.qAll, kc, vc, s.len, m, mask, c.Heads, c.KVHeads, hd, scale, base+lo, base+hi, s.scratch[ch])
			})
		}
		s.act.set(s.attOut[base*H:m*H], n, H)
		f.matmul(xb, w.O, &s.act)
		add(x, xb)
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
	hidden := s.hidden[:n*H]
	if logitsFrom < n && len(s.logits) < s.rows*c.Vocab {
		s.logits = make([]float32, s.rows*c.Vocab)
	}
	if s.off != nil {
		// The rest runs on the other device: the new rows' mask rows
		// are the last n of the pending nodes'.
		return s.off.Forward(x, n, pos, s.len, base, mask[base*m:], logitsFrom, hidden, s.logits)
	}
	f.K.RMSNorm(hidden, x, f.M.OutputNorm, n, H, c.RMSEps)
	if logitsFrom < n {
		rows := n - logitsFrom
		s.act.set(hidden[logitsFrom*H:], rows, H)
		f.matmul(s.logits[:rows*c.Vocab], f.M.Output, &s.act)
	}
	return nil
}

// matmul: out[n × Rows] = act[n × Cols] · Wᵀ, split over the pool by
// weight rows.
func (f *Fast) matmul(out []float32, w *models.Tensor, a *actBuf) {
	act, rowBytes := a.form(w.Type)
	p := f.packed[w]
	if alone(len(w.Data) * a.n) {
		if p != nil {
			f.K.MatMulPacked(out, w.Rows, p, 0, w.Rows, act, rowBytes, a.n)
		} else {
			f.K.MatMul(w.Type, out, w.Rows, w.Data, w.RowBytes, 0, w.Rows, act, rowBytes, a.n, w.Cols)
		}
		return
	}
	if p != nil {
		g := f.K.PackRows
		groups := (w.Rows + g - 1) / g
		if th := f.pool.cThreads(f.K); th != nil {
			// One call into C for the whole product: see kernels.Threads.
			// Each piece restarts the weight stream's prefetch, so pieces
			// are a quarter of a thread's share, or half with 8 rows or
			// more: smaller pieces made verification slower, a whole
			// share no faster (docs/measurements, "Pieces of a product").
			grain := max(groups/(4*th.N()), 4)
			if a.n >= 8 {
				grain = max(groups/(2*th.N()), 2)
			}
			th.MatMulPacked(out, w.Rows, p, act, rowBytes, a.n, grain)
			return
		}
		// Pieces of about an eighth of a thread's share, taken as workers
		// come free: a fixed split waits for the slowest thread. At least
		// 8 groups a piece: on tiny models a call into C per few rows
		// cost more than it balanced.
		f.pool.ForDynamic(groups, max(groups/(8*f.pool.Threads()), 8), func(lo, hi int) {
			f.K.MatMulPacked(out, w.Rows, p, lo*g, min(hi*g, w.Rows), act, rowBytes, a.n)
		})
		return
	}
	if th := f.pool.cThreads(f.K); th != nil {
		// Pieces of a quarter of a thread's share, whole 16-row tiles.
		grain := max((w.Rows/(4*th.N())+15)/16*16, 16)
		if th.MatMul(w.Type, out, w.Rows, w.Data, w.RowBytes, w.Rows, act, rowBytes, a.n, w.Cols, grain) {
			return
		}
	}
	f.pool.For(w.Rows, func(lo, hi int) {
		f.K.MatMul(w.Type, out, w.Rows, w.Data, w.RowBytes, lo, hi, act, rowBytes, a.n, w.Cols)
	})
}

// aloneBytes: a product or attention that reads fewer bytes than this
// (weights or cached keys and values, times the rows it computes) runs on
// the calling thread alone. Handing part of it to another thread costs
// about a microsecond and saves less; and a step of a tiny model, a few
// dozen such calls, then never waits for a thread the OS has preempted
// (docs/measurements, "Small products on one thread").
var aloneBytes = 64 << 10

func alone(bytes int) bool { return bytes < aloneBytes }

// yieldEvery bounds how long a forward pass runs without yielding: see
// Seq.yield.
const yieldEvery = 4 * time.Millisecond

// yield lets the Go scheduler see the goroutine reschedule every
// yieldEvery. A forward pass spends its time in calls into C, which the
// scheduler counts as system calls; one that runs 10 ms on one
// scheduling tick gets its P retaken by sysmon every 20 µs for as long
// as it goes on (runtime.retake), waking runtime threads onto the cores
// the kernels' threads spin and stream on (docs/measurements, "The Go
// scheduler during a forward pass").
func (s *Seq) yield() {
	if now := time.Now(); now.Sub(s.yielded) >= yieldEvery {
		runtime.Gosched()
		s.yielded = now
	}
}

// commit keeps the pending nodes on path (see State.Commit).
func (s *Seq) commit(path []int) error {
	if err := checkPath(s.pending, path); err != nil {
		return err
	}
	if s.off != nil {
		if err := s.off.Commit(s.len, path); err != nil {
			return err
		}
	}
	d := s.kvDim
	for k, p := range path {
		if p == k {
			continue
		}
		to, from := (s.len+k)*d, (s.len+p)*d
		for l := range s.k {
			copy(s.k[l][to:to+d], s.k[l][from:from+d])
			copy(s.v[l][to:to+d], s.v[l][from:from+d])
		}
	}
	s.len += len(path)
	s.pending = s.pending[:0]
	return nil
}

// actBuf holds a batch of activation rows in the form each weight type
// multiplies them in, each form computed at most once per batch.
type actBuf struct {
	k       *kernels.Set
	x       []float32
	n, cols int
	buf     [quant.BF16 + 1][]byte // by activation type
	done    [quant.BF16 + 1][]byte // this batch's forms, once computed
}

func newActBuf(k *kernels.Set, values int) actBuf {
	a := actBuf{k: k}
	for _, t := range []quant.Type{quant.F16, quant.BF16, quant.Q8_0, quant.Q4_K} { // one weight type per form
		a.buf[kernels.ActivationType(t)] = make([]byte, kernels.ActivationBytes(t, values))
	}
	return a
}

func (a *actBuf) set(x []float32, n, cols int) {
	a.x, a.n, a.cols = x[:n*cols], n, cols
	a.done = [quant.BF16 + 1][]byte{}
}

// form returns the activations as bytes for weights of type t (in the form
// kernels.ActivationType gives) and the bytes per row.
func (a *actBuf) form(t quant.Type) (act []byte, rowBytes int) {
	f := kernels.ActivationType(t)
	if f == quant.F32 {
		return kernels.Bytes(a.x), 4 * a.cols
	}
	if a.done[f] == nil {
		a.done[f] = a.k.Activations(t, a.buf[f], a.x)
	}
	return a.done[f], kernels.ActivationBytes(t, a.cols)
}
