package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"dovetail/quant"
)

// packingSets are the levels that pack weights.
func packingSets(t *testing.T) []*Set {
	var out []*Set
	for _, s := range sets(t) {
		if s.Pack(quant.Q8_0, make([]byte, 34), 34, 1, 32) != nil {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		t.Skip("no level here packs weights")
	}
	return out
}

// packedCase is a shape of a packed product to test.
type packedCase struct {
	t          quant.Type
	rows, cols int
}

// packedCases are a shape for every packed type of the kernel table, and
// extra that cross the products' limits: a partial row group, the
// 4096-column piece, rows too wide for a table of 64 activation rows.
func packedCases(extra []packedCase) []packedCase {
	var cs []packedCase
	for _, k := range table {
		if k.layouts == packable {
			cs = append(cs, packedCase{k.t, 37, typicalCols(k.t)})
		}
	}
	return append(cs, extra...)
}

// TestMatMulPacked checks packed products against the Go reference (within
// float tolerance) on shapes that leave a partial row group, cross the
// 4096-column piece and are too wide for a whole chunk of rows, and checks that a row's result does not depend on how
// many activation rows go with it, nor on whether AMX computes it: that is
// what keeps verifying a tree bit for bit equal to decoding its nodes.
func TestMatMulPacked(t *testing.T) {
	ss := packingSets(t)
	for _, c := range packedCases([]packedCase{
		{quant.Q8_0, 16, 32}, {quant.Q4_0, 1, 64},
		{quant.Q5_0, 1, 64}, {quant.Q5_0, 19, 32 * 600},
		{quant.IQ4_NL, 1, 64}, {quant.IQ4_NL, 19, 32 * 600},
		{quant.Q4_1, 1, 64}, {quant.Q4_1, 19, 32 * 600},
		{quant.Q5_1, 1, 64}, {quant.Q5_1, 19, 32 * 600},
		{quant.Q8_0, 35, 32 * 131}, {quant.Q4_0, 19, 32 * 129},
		// Rows too wide for a table of 64 activation rows: chunks of 48,
		// 16 and 15 rows.
		{quant.Q4_0, 19, 32 * 600}, {quant.Q8_0, 17, 32 * 1100}, {quant.Q4_0, 3, 32 * 2100},
		{quant.Q4_K, 1, 256}, {quant.Q5_K, 19, 256 * 17}, {quant.Q6_K, 5, 256}, {quant.IQ4_XS, 17, 256}, {quant.Q3_K, 3, 256}, {quant.Q2_K, 18, 256},
		{quant.F16, 1, 64}, {quant.BF16, 37, 32 * 24}, {quant.BF16, 69, 32},
	}) {
		r := rand.New(rand.NewPCG(uint64(c.rows), uint64(c.cols)))
		wsz, _ := c.t.RowSize(c.cols)
		asz, _ := ActivationType(c.t).RowSize(c.cols)
		rowBytes, actRowBytes := wsz+6, asz+10
		w := guarded(t, (c.rows-1)*rowBytes+wsz)
		randWeights(r, c.t, c.rows, c.cols, rowBytes, w, true)
		const nmax = 70
		act := guarded(t, (nmax-1)*actRowBytes+asz)
		randActs(r, c.t, nmax, c.cols, actRowBytes, act)
		ldo := c.rows + 3
		want := make([]float32, (nmax-1)*ldo+c.rows)
		goSet.MatMul(c.t, want, ldo, w, rowBytes, 0, c.rows, act, actRowBytes, nmax, c.cols)
		var first []float32 // row results of the first level at n = 1
		for _, s := range ss {
			pk := s.Pack(c.t, w, rowBytes, c.rows, c.cols)
			if pk == nil {
				t.Fatalf("%v: %s does not pack it", c.t, s.Name)
			}
			// n = 1 row by row, as decode computes them.
			one := make([]float32, nmax*ldo)
			for j := range nmax {
				s.MatMulPacked(one[j*ldo:], ldo, pk, 0, c.rows, act[j*actRowBytes:], actRowBytes, 1)
			}
			for j := range nmax {
				for row := range c.rows {
					i := j*ldo + row
					mag := magnitude(c.t, w[row*rowBytes:], act[j*actRowBytes:], c.cols)
					if d := math.Abs(float64(one[i]) - float64(want[i])); !(d <= tolerance(c.t, c.cols, mag)) {
						t.Fatalf("%v %dx%d %s: row %d act %d: got %g, want %g", c.t, c.rows, c.cols, s.Name, row, j, one[i], want[i])
					}
				}
			}
			if first == nil {
				first = one
			}
			for _, n := range []int{2, 3, 8, 16, 17, 31, 64, 70} {
				name := fmt.Sprintf("%v %dx%d %s n=%d", c.t, c.rows, c.cols, s.Name, n)
				got := make([]float32, (n-1)*ldo+c.rows)
				for i := range got {
					got[i] = sentinel
				}
				// Two workers' halves, split on a row group.
				split := min(c.rows, s.PackRows)
				s.MatMulPacked(got, ldo, pk, 0, split, act, actRowBytes, n)
				s.MatMulPacked(got, ldo, pk, split, c.rows, act, actRowBytes, n)
				for j := range n {
					for row := range ldo {
						i := j*ldo + row
						if i >= len(got) {
							break
						}
						if row >= c.rows {
							if got[i] != sentinel {
								t.Fatalf("%s: wrote out[%d] past the last row", name, i)
							}
							continue
						}
						if math.Float32bits(got[i]) != math.Float32bits(first[i]) {
							t.Fatalf("%s: row %d act %d: %g, but %g with one activation row at %s", name, row, j, got[i], first[i], ss[0].Name)
						}
					}
				}
			}
		}
	}
}

// TestMatMulPackedScratchless checks the products over Q8_0 activations
// where no scratch memory can be had (value by value) against their tiles,
// bit for bit: rows crossing the 4096-column piece, a partial row group,
// one activation row and several.
func TestMatMulPackedScratchless(t *testing.T) {
	for _, s := range packingSets(t) {
		for _, k := range table {
			if k.layouts != packable || k.act != quant.Q8_0 {
				continue
			}
			typ := k.t
			const rows, cols, n = 19, 32 * 130, 5
			r := rand.New(rand.NewPCG(uint64(typ), 9))
			wsz, _ := typ.RowSize(cols)
			asz, _ := ActivationType(typ).RowSize(cols)
			w := make([]byte, rows*wsz)
			randWeights(r, typ, rows, cols, wsz, w, true)
			act := make([]byte, n*asz)
			randActs(r, typ, n, cols, asz, act)
			pk := s.Pack(typ, w, wsz, rows, cols)
			for _, m := range []int{1, n} {
				want, got := make([]float32, m*rows), make([]float32, m*rows)
				s.MatMulPacked(want, rows, pk, 0, rows, act, asz, m)
				s.scratchless(true)
				s.MatMulPacked(got, rows, pk, 0, rows, act, asz, m)
				s.scratchless(false)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v %s n=%d: out[%d] = %g without scratch, %g with", typ, s.Name, m, i, got[i], want[i])
					}
				}
			}
		}
	}
}

func TestMatMulPackedChecks(t *testing.T) {
	ss := packingSets(t)
	s := ss[0]
	w := make([]byte, 34*40)
	pk := s.Pack(quant.Q8_0, w, 34, 40, 32)
	act, out := make([]byte, 34), make([]float32, 40)
	for name, f := range map[string]func(){
		"unaligned lo": func() { s.MatMulPacked(out, 40, pk, 3, 40, act, 34, 1) },
		"unaligned hi": func() { s.MatMulPacked(out, 40, pk, 0, 20, act, 34, 1) },
		"hi past rows": func() { s.MatMulPacked(out, 40, pk, 0, 48, act, 34, 1) },
		"short act":    func() { s.MatMulPacked(out, 40, pk, 0, 40, act[:20], 34, 1) },
		"short out":    func() { s.MatMulPacked(out[:30], 40, pk, 0, 40, act, 34, 1) },
		"short w":      func() { s.Pack(quant.Q8_0, w[:100], 34, 40, 32) },
		"go level":     func() { goSet.MatMulPacked(out, 40, pk, 0, 40, act, 34, 1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
	if p := s.Pack(quant.IQ2_XXS, make([]byte, 66), 66, 1, 256); p != nil {
		t.Errorf("Pack(IQ2_XXS) = %v, want nil: IQ2_XXS multiplies from the GGUF layout", p)
	}
	if p := s.Pack(quant.F16, make([]byte, 2*40), 2*40, 1, 40); p != nil {
		t.Errorf("Pack(F16) of 40 columns = %v, want nil: packed F16 rows are whole blocks of 32", p)
	}
}

// TestThreads runs whole packed products on C threads and checks them bit
// for bit against one thread's, with pieces of several sizes.
func TestThreads(t *testing.T) {
	for _, s := range packingSets(t) {
		th := s.NewThreads(3)
		if th == nil {
			t.Logf("%s: no C threads here", s.Name)
			continue
		}
		for _, c := range packedCases([]packedCase{
			{quant.Q8_0, 99, 96}, {quant.Q4_0, 37, 32 * 9}, {quant.Q4_0, 37, 32 * 600}, {quant.Q8_0, 5, 64}, {quant.Q5_0, 37, 32 * 28},
			{quant.Q4_K, 99, 512}, {quant.Q5_K, 37, 256}, {quant.Q6_K, 21, 512}, {quant.IQ4_XS, 33, 256}, {quant.Q3_K, 40, 512},
			{quant.Q2_K, 17, 256}, {quant.F16, 70, 96}, {quant.BF16, 9, 256}, {quant.Q4_1, 37, 32 * 9}, {quant.Q5_1, 21, 64},
			{quant.IQ4_NL, 19, 96},
		}) {
			r := rand.New(rand.NewPCG(uint64(c.rows), 7))
			wsz, _ := c.t.RowSize(c.cols)
			asz, _ := ActivationType(c.t).RowSize(c.cols)
			w := make([]byte, c.rows*wsz)
			randWeights(r, c.t, c.rows, c.cols, wsz, w, true)
			pk := s.Pack(c.t, w, wsz, c.rows, c.cols)
			if pk == nil {
				t.Fatalf("%v: %s does not pack it", c.t, s.Name)
			}
			for _, n := range []int{1, 9, 17} {
				act := make([]byte, n*asz)
				randActs(r, c.t, n, c.cols, asz, act)
				want := make([]float32, n*c.rows)
				s.MatMulPacked(want, c.rows, pk, 0, c.rows, act, asz, n)
				for _, grain := range []int{0, 1, 2, 5, 100} {
					got := make([]float32, n*c.rows)
					th.MatMulPacked(got, c.rows, pk, act, asz, n, grain)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s %v %dx%d n=%d grain=%d: out[%d] = %g, want %g", s.Name, c.t, c.rows, c.cols, n, grain, i, got[i], want[i])
						}
					}
				}
			}
		}
		// Products in the GGUF layout, on the same threads: every type of
		// the kernel table, and a few more shapes.
		plain := []packedCase{{quant.IQ4_XS, 99, 512}, {quant.Q3_K, 37, 256}, {quant.F16, 21, 96}, {quant.Q4_K, 5, 256}}
		for _, k := range table {
			plain = append(plain, packedCase{k.t, 37, typicalCols(k.t)})
		}
		for _, c := range plain {
			r := rand.New(rand.NewPCG(uint64(c.rows), 8))
			wsz, _ := c.t.RowSize(c.cols)
			asz, _ := ActivationType(c.t).RowSize(c.cols)
			w := make([]byte, c.rows*wsz)
			randWeights(r, c.t, c.rows, c.cols, wsz, w, true)
			for _, n := range []int{1, 9, 17} {
				act := make([]byte, n*asz)
				randActs(r, c.t, n, c.cols, asz, act)
				want := make([]float32, n*c.rows)
				s.MatMul(c.t, want, c.rows, w, wsz, 0, c.rows, act, asz, n, c.cols)
				for _, grain := range []int{1, 16, 32, 1000} {
					got := make([]float32, n*c.rows)
					if !th.MatMul(c.t, got, c.rows, w, wsz, c.rows, act, asz, n, c.cols, grain) {
						t.Fatalf("%s: Threads.MatMul refused %v", s.Name, c.t)
					}
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s %v %dx%d n=%d grain=%d: out[%d] = %g, want %g", s.Name, c.t, c.rows, c.cols, n, grain, i, got[i], want[i])
						}
					}
				}
			}
		}
		// Every type quant reads has a C kernel; one without (GGUF's TQ1_0,
		// which quant does not read) is refused, for the caller's Go path.
		if tq1 := quant.Type(34); th.MatMul(tq1, make([]float32, 1), 1, make([]byte, 54), 54, 1, make([]byte, 1024), 1024, 1, 256, 16) {
			t.Errorf("%s: Threads.MatMul took type 34 (TQ1_0), which has no C kernel", s.Name)
		}
		th.Close()
		th.Close() // a second Close does nothing
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: MatMulPacked after Close did not panic", s.Name)
				}
			}()
			pk := s.Pack(quant.Q8_0, make([]byte, 34), 34, 1, 32)
			th.MatMulPacked(make([]float32, 1), 1, pk, make([]byte, 34), 34, 1, 1)
		}()
	}
}

// TestThreadsBusyHost runs products on C threads that have gone to sleep,
// while goroutines keep every core busy: woken threads come late, the
// caller closes jobs without them, and a late thread must then leave the
// job alone. Every result must still be one thread's, bit for bit.
func TestThreadsBusyHost(t *testing.T) {
	for _, s := range packingSets(t) {
		th := s.NewThreads(3)
		if th == nil {
			t.Logf("%s: no C threads here", s.Name)
			continue
		}
		const rows, cols, n = 67, 96, 3
		r := rand.New(rand.NewPCG(5, 5))
		wsz, _ := quant.Q8_0.RowSize(cols)
		w := make([]byte, rows*wsz)
		randWeights(r, quant.Q8_0, rows, cols, wsz, w, true)
		pk := s.Pack(quant.Q8_0, w, wsz, rows, cols)
		act := make([]byte, n*wsz)
		randActs(r, quant.Q8_0, n, cols, wsz, act)
		want := make([]float32, n*rows)
		s.MatMulPacked(want, rows, pk, 0, rows, act, wsz, n)
		stop := make(chan struct{})
		var burners sync.WaitGroup
		for range runtime.GOMAXPROCS(0) {
			burners.Add(1)
			go func() {
				defer burners.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
				}
			}()
		}
		for i := range 150 {
			// Longer than the threads spin: they sleep, and the next
			// product wakes them.
			if i%3 == 0 {
				time.Sleep(1500 * time.Microsecond)
			}
			got := make([]float32, n*rows)
			th.MatMulPacked(got, rows, pk, act, wsz, n, 1)
			for j := range got {
				if math.Float32bits(got[j]) != math.Float32bits(want[j]) {
					close(stop)
					burners.Wait()
					t.Fatalf("%s, product %d: out[%d] = %g, want %g", s.Name, i, j, got[j], want[j])
				}
			}
		}
		close(stop)
		burners.Wait()
		th.Close()
	}
}

// TestThreadsAttention checks tree attention on C threads bit for bit
// against one thread's, over a row range that leaves rows out and over one
// row, whose heads the threads share: with KV heads of 3, 7 (the threads'
// shares of the heads cut through them) and 8 query heads (taken four at a
// time), and KV heads of one head (multi-head attention: 12 heads, six a
// thread, four at a time and two alone).
func TestThreadsAttention(t *testing.T) {
	for _, s := range packingSets(t) {
		th := s.NewThreads(2)
		if th == nil {
			continue
		}
		defer th.Close()
		for _, shape := range [][3]int{{6, 2, 40}, {14, 2, 64}, {32, 4, 64}, {12, 12, 64}, {6, 6, 40}} {
			heads, kvHeads, hd := shape[0], shape[1], shape[2]
			const past, n = 37, 9
			r := rand.New(rand.NewPCG(11, 12))
			T := past + n
			kc, vc := randKV(r, T*kvHeads*hd)
			kc, vc = guardedHalves(t, kc), guardedHalves(t, vc)
			q := randFloats(r, n*heads*hd, 1)
			mask := treeMask(r, n)
			// Rows 2..7, a row a piece; row 5 alone, split by heads.
			for _, rows := range [][2]int{{2, 8}, {5, 6}} {
				want := make([]float32, n*heads*hd)
				s.Attention(want, q, kc, vc, past, n, mask, heads, kvHeads, hd, 0.15, rows[0], rows[1], make([]float32, AttentionScratch(past, n)))
				withSweeps(s, func(sweep int64) {
					got := make([]float32, n*heads*hd)
					th.Attention(got, q, kc, vc, past, n, mask, heads, kvHeads, hd, 0.15, rows[0], rows[1], make([]float32, AttentionScratch(past, n)))
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s sweep=%d heads %d/%d rows %v: out[%d] = %g, want %g", s.Name, sweep, heads, kvHeads, rows, i, got[i], want[i])
						}
					}
				})
			}
		}
	}
}

// Q8_0, Q4_0 and Q5_0 rows wider than the packed products' activation
// tables stay in the GGUF layout; the widest that fits packs.
func TestPackTooWide(t *testing.T) {
	for _, s := range packingSets(t) {
		for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_0, quant.Q5_0} {
			for _, c := range []struct {
				blocks int
				packs  bool
			}{{maxPackedQ8Blocks, true}, {maxPackedQ8Blocks + 1, false}} {
				rb, _ := typ.RowSize(32 * c.blocks)
				if p := s.Pack(typ, make([]byte, rb), rb, 1, 32*c.blocks); (p != nil) != c.packs {
					t.Errorf("%s %v: %d blocks a row packed: %v, want %v", s.Name, typ, c.blocks, p != nil, c.packs)
				}
			}
		}
	}
}

// TestPackEach packs a matrix larger than a packing chunk: done reports
// every row once, in order, in more than one piece, and the product over
// the packed matrix is the reference's.
func TestPackEach(t *testing.T) {
	const rows, cols = 2000, 32 * 130 // about 4.7 MB of Q4_0: two chunks
	typ := quant.Q4_0
	r := rand.New(rand.NewPCG(7, 8))
	rb, _ := typ.RowSize(cols)
	w := make([]byte, rows*rb)
	randWeights(r, typ, rows, cols, rb, w, false)
	asz, _ := ActivationType(typ).RowSize(cols)
	act := make([]byte, asz)
	randActs(r, typ, 1, cols, asz, act)
	want := make([]float32, rows)
	goSet.MatMul(typ, want, rows, w, rb, 0, rows, act, asz, 1, cols)
	for _, s := range packingSets(t) {
		var pieces [][2]int
		pk := s.PackEach(typ, w, rb, rows, cols, func(lo, hi int) { pieces = append(pieces, [2]int{lo, hi}) })
		if len(pieces) < 2 {
			t.Fatalf("%s: %d pieces, want the matrix packed in several", s.Name, len(pieces))
		}
		next := 0
		for _, p := range pieces {
			if p[0] != next || p[1] <= p[0] || p[0]%s.PackRows != 0 {
				t.Fatalf("%s: pieces %v: not consecutive row groups", s.Name, pieces)
			}
			next = p[1]
		}
		if next != rows {
			t.Fatalf("%s: pieces %v end at row %d of %d", s.Name, pieces, next, rows)
		}
		got := make([]float32, rows)
		s.MatMulPacked(got, rows, pk, 0, rows, act, asz, 1)
		for i := range got {
			mag := magnitude(typ, w[i*rb:], act, cols)
			if d := math.Abs(float64(got[i]) - float64(want[i])); !(d <= tolerance(typ, cols, mag)) {
				t.Fatalf("%s: row %d: got %g, want %g", s.Name, i, got[i], want[i])
			}
		}
	}
}

// TestMatMulPackedExtremes multiplies weights whose quants are all at
// their largest by activations all at ±127: the sums the AVX2 tiles keep
// in 16 bits are then at their bound, where one vector too many before
// widening wraps (random values stay far below it).
func TestMatMulPackedExtremes(t *testing.T) {
	const rows, n = 19, 5
	for _, k := range table {
		// The block's f16 scales are set to 0.01, the rest (quants and
		// integer scales) has all bits set: their largest values. Floats
		// have no integer sums.
		typ, at := k.t, typeTests[k.t].scales
		if k.layouts != packable || len(at) == 0 {
			continue
		}
		cols := 2 * typ.BlockSize()
		rb, _ := typ.RowSize(cols)
		w := make([]byte, rows*rb)
		fill := byte(0xff)
		if typ == quant.Q8_0 {
			fill = 0x7f // 127: Q8_0's quants are signed
		}
		for i := range w {
			w[i] = fill
		}
		bs := typ.TypeSize()
		for b := 0; b < len(w); b += bs {
			for _, o := range at {
				putF16(w[b+o:], 0.01)
			}
		}
		asz, _ := ActivationType(typ).RowSize(cols)
		act := make([]byte, n*asz)
		for j := range n {
			x := make([]float32, cols)
			for i := range x {
				x[i] = float32(1 - 2*(j%2)) // +1 or -1: quants ±127
			}
			if ActivationType(typ) == quant.Q8_K {
				goSet.QuantizeQ8_K(act[j*asz:], x)
			} else {
				goSet.QuantizeQ8_0(act[j*asz:], x)
			}
		}
		want := make([]float32, n*rows)
		goSet.MatMul(typ, want, rows, w, rb, 0, rows, act, asz, n, cols)
		for _, s := range packingSets(t) {
			pk := s.Pack(typ, w, rb, rows, cols)
			if pk == nil {
				t.Fatalf("%v: %s does not pack it", typ, s.Name)
			}
			got := make([]float32, n*rows)
			s.MatMulPacked(got, rows, pk, 0, rows, act, asz, n)
			for i := range got {
				if d := math.Abs(float64(got[i] - want[i])); !(d <= 1e-3*math.Abs(float64(want[i]))) {
					t.Fatalf("%v %s: out[%d] = %g, want %g", typ, s.Name, i, got[i], want[i])
				}
			}
		}
	}
}
