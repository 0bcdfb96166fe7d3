package cpu

import (
	"dovetail/cpu/kernels"
	"dovetail/models"
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
// It does what package reference does, in the same order and with the same
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
	lone   int                                // Options.AloneBytes
}

// Options say how a Fast model runs; the zero value is the default.
type Options struct {
	// Offload is the part of the model another device runs (nil: none):
	// only the layers before it are packed, and sequences keep caches for
	// those only.
	Offload *Offload
	// AloneBytes: a product or attention that reads fewer bytes than this
	// (weights or cached keys and values, times the rows it computes)
	// runs on the calling thread alone (0: DefaultAloneBytes; negative:
	// none). Handing part of it to another thread costs about a
	// microsecond and saves less; and a step of a tiny model, a few dozen
	// such calls, then never waits for a thread the OS has preempted
	// (docs/measurements/kernels-attention-threads.md, "Small products on
	// one thread, and a spin-wait that yields").
	AloneBytes int
}

// DefaultAloneBytes is Options.AloneBytes's default.
const DefaultAloneBytes = 64 << 10

// NewFast prepares m for sequences of ctx positions (≤ 0: the model's
// context length; more than it is allowed, as llama.cpp allows it: the
// caller warns that the model was not trained that far).
func NewFast(m *models.Llama, k *kernels.Set, pool *Pool, ctx int) *Fast {
	return NewFastWith(m, k, pool, ctx, Options{})
}

// NewFastWith is NewFast as o says.
func NewFastWith(m *models.Llama, k *kernels.Set, pool *Pool, ctx int, o Options) *Fast {
	if ctx <= 0 {
		ctx = m.Config.ContextLength
	}
	lone := o.AloneBytes
	if lone == 0 {
		lone = DefaultAloneBytes
	}
	f := &Fast{M: m, K: k, pool: pool, rope: newRopeTable(m.Config, m.RopeFreqs, ctx), ctx: ctx, off: o.Offload, lone: lone}
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

// matmul: out[n × Rows] = act[n × Cols] · Wᵀ, split over the pool by
// weight rows.
func (f *Fast) matmul(out []float32, w *models.Tensor, a *actBuf) {
	act, rowBytes := a.form(w.Type)
	p := f.packed[w]
	if f.alone(len(w.Data) * a.n) {
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
			// One call into C for the whole product: see
			// kernels.Threads. Each piece restarts the weight
			// stream's prefetch, so pieces are a quarter of a
			// thread's share, or half with 8 rows or more:
			// smaller pieces made verification slower, a whole
			// share no faster
			// (docs/measurements/kernels-attention-threads.md,
			// "Pieces of a product").
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

// alone reports whether a product or attention reading bytes runs on
// the calling thread alone (Options.AloneBytes).
func (f *Fast) alone(bytes int) bool { return bytes < f.lone }
