package kernels

import (
	"fmt"
	"sync"

	"dovetail/quant"
)

// Packed is a weight matrix in a level's own layout, made once by Set.Pack
// when a model loads (see c/packed.c): rows in groups of PackRows, each
// group's blocks contiguous and already in the order the dot-product
// instructions read them. A product then streams one run of memory instead
// of sixteen interleaved rows and transposes nothing, which is what decode
// needs to reach memory bandwidth on narrow matrices and what lets AMX tiles
// load weights directly.
type Packed struct {
	Type       quant.Type
	Rows, Cols int
	layout     string
	data       []byte
}

// Bytes is the memory the packed matrix holds.
func (p *Packed) Bytes() int { return len(p.data) }

// Memory is the packed matrix's bytes, to be read only: what a product
// streams, for measuring how fast they can be read.
func (p *Packed) Memory() []byte { return p.data }

// packedBlockBytes is the packed size of one block of 32 columns of a
// group of rows: the same bytes as the GGUF rows.
func packedBlockBytes(t quant.Type, rows int) int {
	return rows * t.TypeSize() * 32 / t.BlockSize()
}

// packImpl is the packing part of a level's impl; levels without it leave
// it zero and Pack returns nil.
type packImpl struct {
	rows   int    // row group, 0: nothing packs
	layout string // levels with the same layout share packed matrices
	packs  func(t quant.Type) bool
	pack   func(t quant.Type, dst, w []byte, rowBytes, rows, cols int)
	matmul func(t quant.Type, out []float32, ldo int, pw []byte, rows, lo, hi int, act []byte, actRowBytes, n, cols int)
	// threads starts a C thread pool, or returns nil.
	threads func(n int) *threadsImpl
	// scratchless makes the single-thread products over Q8_0 activations
	// take their path for when no scratch memory can be had (tests).
	scratchless func(on bool)
}

type threadsImpl struct {
	matmul    func(t quant.Type, out []float32, ldo int, pw []byte, rows int, act []byte, actRowBytes, n, cols, grain int)
	plain     func(t quant.Type, out []float32, ldo int, w []byte, rowBytes, rows int, act []byte, actRowBytes, n, cols, grain int)
	attention func(out, q []float32, kc, vc []uint16, past, n int, mask []uint8, heads, kvHeads, hd int, scale float32, jlo, jhi int, scratch []float32)
	free      func()
}

// Threads is a pool of C threads that runs whole packed matrix products in
// parallel (see c/threads.c): one call from Go per product, with the calling
// goroutine taking pieces too, and no hand-off through the Go scheduler.
// Idle threads spin for under a millisecond, then sleep. A Threads is safe
// for concurrent use (products run one at a time) until Close.
type Threads struct {
	n      int
	layout string
	mu     sync.Mutex
	im     *threadsImpl
}

// N is the number of threads a product runs on, the caller's included.
func (t *Threads) N() int { return t.n }

// MatMulPacked computes every row of a packed product (see Set.MatMulPacked)
// in pieces of grain row groups taken in turn by the threads.
func (t *Threads) MatMulPacked(out []float32, ldo int, p *Packed, act []byte, actRowBytes, n, grain int) {
	if p.layout != t.layout {
		panic(fmt.Sprintf("kernels: Threads.MatMulPacked: a matrix packed as %q given to threads for %q", p.layout, t.layout))
	}
	rb, _ := p.Type.RowSize(p.Cols)
	if !checkMatMul(p.Type, out, ldo, p.data[:p.Rows*rb], rb, 0, p.Rows, act, actRowBytes, n, p.Cols) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.im == nil {
		panic("kernels: Threads.MatMulPacked after Close")
	}
	t.im.matmul(p.Type, out, ldo, p.data, p.Rows, act, actRowBytes, n, p.Cols, max(grain, 1))
}

// MatMul is Set.MatMul over every row of w (rows of them), in pieces of
// grain rows taken in turn by the threads: weights that are not packed
// share the threads with those that are, instead of Go workers the
// threads' spinning would slow. It reports false, doing nothing, for a
// type without C kernels (the caller runs it in Go).
func (t *Threads) MatMul(typ quant.Type, out []float32, ldo int, w []byte, rowBytes, rows int, act []byte, actRowBytes, n, cols, grain int) bool {
	if !native(typ) {
		return false
	}
	if !checkMatMul(typ, out, ldo, w, rowBytes, 0, rows, act, actRowBytes, n, cols) {
		return true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.im == nil {
		panic("kernels: Threads.MatMul after Close")
	}
	t.im.plain(typ, out, ldo, w, rowBytes, rows, act, actRowBytes, n, cols, max(grain, 1))
	return true
}

// Attention is Set.Attention over rows [jlo, jhi), a group of
// AttentionRows rows (or a share of its heads) at a time on each thread,
// every thread with scratch of its own (scratch is the
// caller's, used only should it fail to allocate one).
func (t *Threads) Attention(out, q []float32, kc, vc []uint16, past, n int, mask []uint8, heads, kvHeads, hd int, scale float32, jlo, jhi int, scratch []float32) {
	checkAttention(out, q, kc, vc, past, n, mask, heads, kvHeads, hd, jlo, jhi, scratch)
	if jhi == jlo {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.im == nil {
		panic("kernels: Threads.Attention after Close")
	}
	t.im.attention(out, q, kc, vc, past, n, mask, heads, kvHeads, hd, scale, jlo, jhi, scratch)
}

// Close stops the threads. A nil Threads closes as a no-op.
func (t *Threads) Close() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.im != nil {
		t.im.free()
		t.im = nil
	}
}

// packChunkBytes is about how much of a matrix PackEach packs before it
// reports those rows done: what packing holds twice (the file's rows and
// their copy) at a time.
const packChunkBytes = 4 << 20

// maxPackedQ8Blocks is the widest row over Q8_0 activations (Q8_0, Q4_0,
// Q5_0, IQ4_NL, Q4_1, Q5_1), in blocks, whose
// products packed.c's activation tables hold (a whole row of blocks for at
// least one activation row; its stack fallback has 8192 entries): wider
// matrices stay in the GGUF layout.
const maxPackedQ8Blocks = 8192

func (s *Set) setPacking(pi packImpl) {
	s.PackRows = pi.rows
	s.scratchless = pi.scratchless
	s.NewThreads = func(n int) *Threads {
		if pi.threads == nil || n < 2 {
			return nil
		}
		im := pi.threads(n)
		if im == nil {
			return nil
		}
		return &Threads{n: n, layout: pi.layout, im: im}
	}
	s.Pack = func(t quant.Type, w []byte, rowBytes, rows, cols int) *Packed {
		return s.PackEach(t, w, rowBytes, rows, cols, nil)
	}
	s.PackEach = func(t quant.Type, w []byte, rowBytes, rows, cols int, done func(lo, hi int)) *Packed {
		if pi.rows == 0 || !pi.packs(t) {
			return nil
		}
		bb := packedBlockBytes(t, pi.rows)
		if rows < 1 || cols < 1 {
			panic(fmt.Sprintf("kernels: Pack %v: %d rows of %d values", t, rows, cols))
		}
		if ActivationType(t) == quant.Q8_0 && cols/32 > maxPackedQ8Blocks {
			return nil
		}
		if cols%32 != 0 {
			return nil // F16 and BF16 rows of any width; packed ones in blocks of 32 columns
		}
		ab := ActivationBytes(t, cols)
		checkMatMul(t, make([]float32, rows), rows, w, rowBytes, 0, rows, make([]byte, ab), ab, 1, cols)
		groups := (rows + pi.rows - 1) / pi.rows
		p := &Packed{Type: t, Rows: rows, Cols: cols, layout: pi.layout, data: make([]byte, groups*cols/32*bb)}
		// Row groups in chunks of about packChunkBytes of w.
		groupBytes := cols / 32 * bb
		step := max(1, packChunkBytes/groupBytes) * pi.rows
		for lo := 0; lo < rows; lo += step {
			hi := min(lo+step, rows)
			pi.pack(t, p.data[lo/pi.rows*groupBytes:], w[lo*rowBytes:], rowBytes, hi-lo, cols)
			if done != nil {
				done(lo, hi)
			}
		}
		return p
	}
	s.MatMulPacked = func(out []float32, ldo int, p *Packed, lo, hi int, act []byte, actRowBytes, n int) {
		if p.layout != pi.layout || pi.rows == 0 {
			panic(fmt.Sprintf("kernels: MatMulPacked: a matrix packed as %q given to the %s kernels", p.layout, s.Name))
		}
		if hi > p.Rows || (hi > lo && (lo%pi.rows != 0 || (hi%pi.rows != 0 && hi != p.Rows))) {
			panic(fmt.Sprintf("kernels: MatMulPacked: rows [%d, %d) of %d do not start and end on groups of %d", lo, hi, p.Rows, pi.rows))
		}
		// The packed bytes stand in for GGUF rows of the same size.
		rb, _ := p.Type.RowSize(p.Cols)
		if !checkMatMul(p.Type, out, ldo, p.data[:p.Rows*rb], rb, lo, hi, act, actRowBytes, n, p.Cols) {
			return
		}
		pi.matmul(p.Type, out, ldo, p.data, p.Rows, lo, hi, act, actRowBytes, n, p.Cols)
	}
}
