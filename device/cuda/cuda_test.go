package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"dovetail/device"
	"dovetail/device/cuda/cudaemu"
	"dovetail/dgf"
	"dovetail/dgf/dgftest"
	"dovetail/internal/topk"
	"dovetail/models"
	"dovetail/models/draft"
)

// The CUDA device against the host float32 device: every operation on the
// same random inputs, with sizes that are no multiple of a warp, a tile or
// a vector width, and some past 1024 (a thread block), since GPU kernels
// tend to break at the edges of those. The host is the reference: its
// maths is checked against finite differences in ops_test.go.
//
// The checks take the device under test as a value, not only CUDA, so
// that they can be pointed at any Device implementation.

// Values are compared as |got − want| ≤ tol·max(1, |want|): float32 sums
// in another order differ by more the longer they are.
const (
	cudaTol     = 2e-4
	cudaTolLong = 1e-3 // sums over 300 and more terms, attention's backward
)

// tolFor is the tolerance of a product whose inner dimension is inner.
func tolFor(inner int) float64 {
	if inner >= 300 {
		return cudaTolLong
	}
	return cudaTol
}

// cudaShared is opened once per test binary: a CUDA context costs far more
// to create than any test here takes.
var cudaShared struct {
	once     sync.Once
	dev      device.Device
	err      error
	lib      string // the driver library it was opened with
	emulated bool
}

// cudaOrSkip is CUDA device 0, or where there is none the emulator
// (cudaemu), or a skip where that cannot be built either. Benchmarks skip
// on the emulator: its timings mean nothing.
func cudaOrSkip(t testing.TB) device.Device {
	t.Helper()
	cudaShared.once.Do(func() {
		s := &cudaShared
		s.dev, s.lib, s.emulated, s.err = cudaemu.Open(DriverPath(), KernelSources(), ErrNoDevice,
			func(lib string) (device.Device, error) { return OpenDriver(lib, 0) })
		if cudaShared.err == nil && cudaShared.dev == nil {
			cudaShared.err = errors.New("Open returned neither a device nor an error")
		}
	})
	switch {
	case errors.Is(cudaShared.err, ErrNoDevice):
		t.Skipf("no CUDA device: %v", cudaShared.err)
	case cudaShared.err != nil:
		t.Fatal(cudaShared.err)
	}
	if _, bench := t.(*testing.B); bench && cudaShared.emulated {
		t.Skip("no CUDA device: benchmarks do not run on the emulator")
	}
	return cudaShared.dev
}

// openAnother opens another device of cudaOrSkip's GPU (or emulator).
func openAnother(t testing.TB) device.Device {
	t.Helper()
	cudaOrSkip(t)
	d, err := OpenDriver(cudaShared.lib, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestCUDABuffers(t *testing.T)    { testBuffers(newPair(t, cudaOrSkip(t), 1)) }
func TestCUDAMatMul(t *testing.T)     { testMatMul(newPair(t, cudaOrSkip(t), 2)) }
func TestCUDAFrozen(t *testing.T)     { testFrozen(newPair(t, cudaOrSkip(t), 3)) }
func TestCUDARMSNorm(t *testing.T)    { testRMSNorm(newPair(t, cudaOrSkip(t), 4)) }
func TestCUDAPointwise(t *testing.T)  { testPointwise(newPair(t, cudaOrSkip(t), 5)) }
func TestCUDARoPE(t *testing.T)       { testRoPE(newPair(t, cudaOrSkip(t), 6)) }
func TestCUDAAttention(t *testing.T)  { testAttention(newPair(t, cudaOrSkip(t), 7)) }
func TestCUDALosses(t *testing.T)     { testLosses(newPair(t, cudaOrSkip(t), 8)) }
func TestCUDAReductions(t *testing.T) { testReductions(newPair(t, cudaOrSkip(t), 9)) }
func TestCUDAAdamW(t *testing.T)      { testAdamW(newPair(t, cudaOrSkip(t), 10)) }
func TestCUDATopK(t *testing.T)       { testTopK(newPair(t, cudaOrSkip(t), 12)) }

// Live publishes weights into the device that sequences draft on from
// another goroutine, so a device is used from several goroutines at once
// (and Go moves goroutines between OS threads, which a CUDA context bound
// to one thread does not survive).
func TestCUDAConcurrentUse(t *testing.T) { testConcurrentUse(newPair(t, cudaOrSkip(t), 11)) }

// pair runs each operation on the device under test and on the host.
type pair struct {
	t   *testing.T
	dev device.Device // under test
	ref device.Device // reference: the host
	rng *rand.Rand
}

func newPair(t *testing.T, dev device.Device, seed uint64) *pair {
	return &pair{t: t, dev: dev, ref: device.NewHost(2), rng: rand.New(rand.NewPCG(seed, 0xc0da))}
}

// twin is one buffer on both devices. The zero twin is a nil argument.
type twin struct{ d, r device.Buffer }

type twinMat struct{ d, r device.Matrix }

// side is one of the pair's devices; b and m pick its half of a twin.
type side struct {
	device.Device
	ref   bool
	after *[]func()
}

func (s side) b(x twin) device.Buffer {
	if s.ref {
		return x.r
	}
	return x.d
}

func (s side) m(x twinMat) device.Matrix {
	if s.ref {
		return x.r
	}
	return x.d
}

// both runs op on the device under test, then on the host.
func (p *pair) both(op func(s side)) {
	var after []func()
	op(side{Device: p.dev, after: &after})
	for _, f := range after {
		f()
	}
	op(side{Device: p.ref, ref: true})
}

// own is what a call on s may read of the caller's slice v: for the device
// under test a copy that is overwritten with junk as soon as the call
// returns. A device must be done with the caller's memory by then, even
// while its kernels still run: callers build such slices afresh and reuse
// them.
func own[E any](s side, v []E, junk E) []E {
	if s.ref || v == nil {
		return v
	}
	c := slices.Clone(v)
	*s.after = append(*s.after, func() {
		for i := range c {
			c[i] = junk
		}
	})
	return c
}

func (p *pair) randf(n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(scale * (2*p.rng.Float64() - 1))
	}
	return v
}

func (p *pair) alloc(n int) twin { return twin{p.dev.Alloc(n), p.ref.Alloc(n)} }

func (p *pair) upload(v []float32) twin {
	x := p.alloc(len(v))
	p.both(func(s side) { s.Upload(s.b(x), own(s, v, float32(math.NaN()))) })
	return x
}

// rand is n random values in [−scale, scale) on both devices.
func (p *pair) rand(n int, scale float64) twin { return p.upload(p.randf(n, scale)) }

func (p *pair) view(x twin, off, n int) twin {
	return twin{p.dev.View(x.d, off, n), p.ref.View(x.r, off, n)}
}

// randIn is a view of n random values at offset off of a random buffer
// with more after it: the parent shows what an operation wrote outside
// the view, and the offset what a kernel assumes about alignment.
func (p *pair) randIn(n, off int, scale float64) (view, parent twin) {
	parent = p.rand(off+n+5, scale)
	return p.view(parent, off, n), parent
}

func (p *pair) matrix(t *models.Tensor) twinMat {
	p.t.Helper()
	d, err := p.dev.UploadMatrix(t)
	if err != nil {
		p.t.Fatalf("%s: %v", t.Name, err)
	}
	r, err := p.ref.UploadMatrix(t)
	if err != nil {
		p.t.Fatalf("%s: %v", t.Name, err)
	}
	return twinMat{d, r}
}

func (p *pair) get(x twin) (got, want []float32) {
	got, want = make([]float32, x.d.Len()), make([]float32, x.r.Len())
	p.dev.Download(got, x.d)
	p.ref.Download(want, x.r)
	return got, want
}

// check compares x on the device under test with the host's.
func (p *pair) check(what string, x twin, tol float64) bool {
	p.t.Helper()
	if x.d.Len() != x.r.Len() {
		p.t.Errorf("%s: %d values, want %d", what, x.d.Len(), x.r.Len())
		return false
	}
	got, want := p.get(x)
	return compare(p.t, what, got, want, tol)
}

// compare reports the first value off by more than tol·max(1, |want|),
// and how many are.
func compare(t testing.TB, what string, got, want []float32, tol float64) bool {
	t.Helper()
	bad, first := 0, -1
	for i := range want {
		if !closeEnough(float64(got[i]), float64(want[i]), tol) {
			if first < 0 {
				first = i
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%s[%d] = %.9g, want %.9g (%d of %d values off by more than %g relative)",
			what, first, got[first], want[first], bad, len(want), tol)
	}
	return bad == 0
}

// closeEnough fails NaN against anything.
func closeEnough(got, want, tol float64) bool {
	return got == want || math.Abs(got-want) <= tol*max(1, math.Abs(want))
}

func testBuffers(p *pair) {
	t := p.t
	if p.dev.Name() == "" {
		t.Error("the device has no name")
	}
	t.Logf("device: %s", p.dev.Name())
	const n = 1001
	// Alloc's zeros are checked in memory a freed buffer left dirty: an
	// allocator that recycles blocks must clear them.
	dirty := p.rand(n, 1)
	p.both(func(s side) { s.Free(s.b(dirty)) })
	b := p.alloc(n)
	if b.d.Len() != n {
		t.Errorf("Alloc(%d).Len() = %d", n, b.d.Len())
	}
	p.check("Alloc", b, 0)

	v := p.randf(n, 1)
	nan := float32(math.NaN())
	p.both(func(s side) { s.Upload(s.b(b), own(s, v, nan)) })
	p.check("Upload", b, 0)
	short := p.randf(37, 1)
	p.both(func(s side) { s.Upload(s.b(b), own(s, short, nan)) })
	p.check("Upload of a prefix", b, 0)
	got, want := make([]float32, 53), make([]float32, 53)
	p.dev.Download(got, b.d)
	p.ref.Download(want, b.r)
	compare(t, "Download of a prefix", got, want, 0)

	// A view of a view is at the sum of the offsets.
	outer := p.view(b, 37, 501)
	inner := p.view(outer, 13, 77)
	if inner.d.Len() != 77 {
		t.Errorf("View(…, 13, 77).Len() = %d", inner.d.Len())
	}
	p.check("View of a view", inner, 0)
	w := p.randf(77, 1)
	p.both(func(s side) { s.Upload(s.b(inner), own(s, w, nan)) })
	p.check("Upload into a view", b, 0)

	// Operations write through views at odd offsets, and only there.
	x := p.rand(n, 3)
	out, in := p.view(b, 101, 303), p.view(x, 7, 303)
	p.both(func(s side) { s.SiLU(s.b(out), s.b(in)) })
	p.check("SiLU into a view", b, cudaTol)
	sum, l, r := p.view(b, 3, 99), p.view(x, 500, 99), p.view(b, 602, 99)
	p.both(func(s side) { s.Add(s.b(sum), s.b(l), s.b(r)) })
	p.check("Add into a view", b, cudaTol)

	// Fresh values, equal on both devices, so that copies compare exactly.
	fresh := p.randf(n, 1)
	p.both(func(s side) { s.Upload(s.b(b), own(s, fresh, nan)) })
	dst, src := p.view(b, 5, 311), p.view(x, 1, 311)
	p.both(func(s side) { s.Copy(s.b(dst), s.b(src)) })
	p.check("Copy between views", b, 0)
	zv := p.view(b, 9, 333)
	p.both(func(s side) { s.Zero(s.b(zv)) })
	p.check("Zero of a view", b, 0)
	c := p.alloc(n)
	p.both(func(s side) { s.Copy(s.b(c), s.b(x)) })
	p.check("Copy", c, 0)
	p.both(func(s side) { s.Zero(s.b(b)) })
	p.check("Zero", b, 0)
	for _, y := range []twin{b, x, c} {
		p.both(func(s side) { s.Free(s.b(y)) })
	}
}

func testMatMul(p *pair) {
	for _, c := range []struct{ n, in, o int }{
		{7, 37, 53},
		{1, 37, 53}, // one row: drafting's matrix-vector products
		{2, 1, 3},
		{65, 129, 33},
		{33, 300, 517}, // past a block in every dimension
		{1, 300, 517},
	} {
		n, in, o := c.n, c.in, c.o
		name := fmt.Sprintf("MatMul %d×%d·(%d×%d)ᵀ", n, in, o, in)
		x, w := p.rand(n*in, 1), p.rand(o*in, 1)
		out := p.rand(n*o, 1) // assigned, not accumulated
		p.both(func(s side) { s.MatMul(s.b(out), s.b(x), s.b(w), n, in, o) })
		p.check(name, out, tolFor(in))
		// Gradients accumulate into what the buffers held.
		dout := p.rand(n*o, 1)
		for _, g := range []struct{ dx, dw bool }{{true, false}, {false, true}, {true, true}} {
			var dx, dw twin
			if g.dx {
				dx = p.rand(n*in, 1)
			}
			if g.dw {
				dw = p.rand(o*in, 1)
			}
			p.both(func(s side) { s.MatMulBackward(s.b(dx), s.b(dw), s.b(dout), s.b(x), s.b(w), n, in, o) })
			if g.dx {
				p.check(fmt.Sprintf("%s dx (dw: %v)", name, g.dw), dx, tolFor(o))
			}
			if g.dw {
				p.check(fmt.Sprintf("%s dw (dx: %v)", name, g.dx), dw, tolFor(n))
			}
		}
	}
	// Every operand at an odd offset.
	n, in, o := 7, 37, 53
	x, _ := p.randIn(n*in, 3, 1)
	w, _ := p.randIn(o*in, 5, 1)
	out, outP := p.randIn(n*o, 7, 1)
	p.both(func(s side) { s.MatMul(s.b(out), s.b(x), s.b(w), n, in, o) })
	p.check("MatMul on views", outP, cudaTol)
	dx, dxP := p.randIn(n*in, 1, 1)
	dw, dwP := p.randIn(o*in, 11, 1)
	p.both(func(s side) { s.MatMulBackward(s.b(dx), s.b(dw), s.b(out), s.b(x), s.b(w), n, in, o) })
	p.check("MatMulBackward on views dx", dxP, cudaTol)
	p.check("MatMulBackward on views dw", dwP, cudaTol)
}

func testFrozen(p *pair) {
	for _, c := range []struct {
		typ           string
		tensor        func(string, int, int, []float64) *models.Tensor
		rows, cols, n int
		tokens        []int
	}{
		{"f32", dgftest.F32Tensor, 1031, 37, 7, []int{0, 1030, 5, 5, 777, 1, 512}},
		{"q8_0", dgftest.Q8Tensor, 1031, 96, 7, []int{1030, 0, 3, 999, 3, 64, 65}},
		{"q8_0", dgftest.Q8Tensor, 517, 320, 1, []int{516}},
		{"f32", dgftest.F32Tensor, 33, 300, 5, []int{32, 0, 16, 1, 31}},
	} {
		rows, cols, n := c.rows, c.cols, c.n
		name := fmt.Sprintf("%s %d×%d", c.typ, rows, cols)
		vals := make([]float64, rows*cols)
		for i := range vals {
			vals[i] = 2*p.rng.Float64() - 1
		}
		m := p.matrix(c.tensor(name, rows, cols, vals))
		if m.d.Rows() != rows || m.d.Cols() != cols {
			p.t.Errorf("%s: UploadMatrix made %d×%d", name, m.d.Rows(), m.d.Cols())
		}
		// Dequantized values are exact in float32.
		emb, embP := p.randIn(len(c.tokens)*cols, 3, 1)
		p.both(func(s side) { s.Embed(s.b(emb), s.m(m), own(s, c.tokens, 0)) })
		p.check("Embed "+name, embP, 0)

		x := p.rand(n*cols, 1)
		out := p.rand(n*rows, 1)
		p.both(func(s side) { s.MatMulFrozen(s.b(out), s.b(x), s.m(m), n) })
		tol := tolFor(cols)
		if c.typ == "q8_0" {
			// The device may multiply in 8 bits, as the CUDA device does
			// (checked exactly in TestCUDABlockMatrices): each activation
			// moves by at most half its block's step, 1/254 of |x| ≤ 1,
			// against weights |w| ≤ 1.
			tol = float64(cols) / 254
		}
		p.check("MatMulFrozen "+name, out, tol)
		dx, dout := p.rand(n*cols, 1), p.rand(n*rows, 1)
		p.both(func(s side) { s.MatMulFrozenBackward(s.b(dx), s.b(dout), s.m(m), n) })
		p.check("MatMulFrozenBackward "+name, dx, tolFor(rows))
		// Twice: a device may cache a transposed copy on first use.
		p.both(func(s side) { s.MatMulFrozenBackward(s.b(dx), s.b(dout), s.m(m), n) })
		p.check("MatMulFrozenBackward again "+name, dx, tolFor(rows))
	}
}

func testRMSNorm(p *pair) {
	const eps = 1e-5
	for _, c := range []struct{ n, c int }{{7, 129}, {1, 37}, {3, 1031}, {2, 4099}} {
		n, cols := c.n, c.c
		name := fmt.Sprintf("%d×%d", n, cols)
		xv := p.randf(n*cols, 2)
		// A row so small that eps dominates its mean square.
		for i := range cols {
			xv[i] *= 1e-3
		}
		x, w := p.upload(xv), p.rand(cols, 1)
		out := p.rand(n*cols, 1)
		p.both(func(s side) { s.RMSNorm(s.b(out), s.b(x), s.b(w), n, cols, eps) })
		p.check("RMSNorm "+name, out, cudaTol)
		dout := p.rand(n*cols, 1)
		for _, withDx := range []bool{true, false} {
			var dx twin
			if withDx {
				dx = p.rand(n*cols, 1)
			}
			dw := p.rand(cols, 1)
			p.both(func(s side) { s.RMSNormBackward(s.b(dx), s.b(dw), s.b(dout), s.b(x), s.b(w), n, cols, eps) })
			if withDx {
				p.check("RMSNormBackward dx "+name, dx, cudaTol)
			}
			p.check(fmt.Sprintf("RMSNormBackward dw %s (dx: %v)", name, withDx), dw, tolFor(n))
		}
	}
}

func testPointwise(p *pair) {
	const n = 1031
	// Arguments of sigmoids far out on both sides, where e^x overflows
	// float32, and 0.
	wide := func() twin {
		v := p.randf(n, 6)
		v[0], v[1], v[2], v[n-1] = -100, 100, 0, -30
		return p.upload(v)
	}
	a, b, z := wide(), p.rand(n, 3), wide()
	out := p.rand(n, 1)
	p.both(func(s side) { s.SiLU(s.b(out), s.b(a)) })
	p.check("SiLU", out, cudaTol)
	dout, da, db, dz := p.rand(n, 1), p.rand(n, 1), p.rand(n, 1), p.rand(n, 1)
	p.both(func(s side) { s.SiLUBackward(s.b(da), s.b(dout), s.b(a)) })
	p.check("SiLUBackward", da, cudaTol)

	p.both(func(s side) { s.SwiGLU(s.b(out), s.b(a), s.b(b)) })
	p.check("SwiGLU", out, cudaTol)
	p.both(func(s side) { s.SwiGLUBackward(s.b(da), s.b(db), s.b(dout), s.b(a), s.b(b)) })
	p.check("SwiGLUBackward dgate", da, cudaTol)
	p.check("SwiGLUBackward dup", db, cudaTol)

	h2 := p.rand(n, 3)
	p.both(func(s side) { s.Gate(s.b(out), s.b(z), s.b(b), s.b(h2)) })
	p.check("Gate", out, cudaTol)
	dh2 := p.rand(n, 1)
	p.both(func(s side) { s.GateBackward(s.b(dz), s.b(db), s.b(dh2), s.b(dout), s.b(z), s.b(b), s.b(h2)) })
	p.check("GateBackward dzpre", dz, cudaTol)
	p.check("GateBackward dh1", db, cudaTol)
	p.check("GateBackward dh2", dh2, cudaTol)

	p.both(func(s side) { s.Add(s.b(out), s.b(a), s.b(b)) })
	p.check("Add", out, cudaTol)
	// The residual stream and gradient sums add in place.
	p.both(func(s side) { s.Add(s.b(a), s.b(a), s.b(b)) })
	p.check("Add into a", a, cudaTol)
	p.both(func(s side) { s.Add(s.b(b), s.b(a), s.b(b)) })
	p.check("Add into b", b, cudaTol)

	rows, ca, cb := 7, 37, 53
	x, y := p.rand(rows*ca, 1), p.rand(rows*cb, 1)
	cat := p.rand(rows*(ca+cb), 1)
	p.both(func(s side) { s.Concat(s.b(cat), s.b(x), s.b(y), rows, ca, cb) })
	p.check("Concat", cat, 0)
	for _, g := range []struct{ da, db bool }{{true, true}, {true, false}, {false, true}} {
		var dx, dy twin
		if g.da {
			dx = p.rand(rows*ca, 1)
		}
		if g.db {
			dy = p.rand(rows*cb, 1)
		}
		p.both(func(s side) { s.ConcatBackward(s.b(dx), s.b(dy), s.b(cat), rows, ca, cb) })
		if g.da {
			p.check(fmt.Sprintf("ConcatBackward da (db: %v)", g.db), dx, cudaTol)
		}
		if g.db {
			p.check(fmt.Sprintf("ConcatBackward db (da: %v)", g.da), dy, cudaTol)
		}
	}
}

func testRoPE(p *pair) {
	// Positions stay below 512: at a few thousand, an angle computed in
	// float32 is off by more than the tolerance by itself.
	pos := []int{0, 1, 2, 7, 100, 301, 511}
	for _, c := range []struct {
		heads, hd, off int
		theta          float32
	}{
		{3, 18, 0, 10000},
		{2, 128, 0, 500000},
		{3, 18, 3, 10000}, // odd offset: no pairwise vector loads
	} {
		name := fmt.Sprintf("%d heads of %d at offset %d, θ %g", c.heads, c.hd, c.off, c.theta)
		n := len(pos) * c.heads * c.hd
		x, xP := p.randIn(n, c.off, 1)
		p.both(func(s side) { s.RoPE(s.b(x), own(s, pos, 0), c.heads, c.hd, c.theta) })
		p.check("RoPE "+name, xP, cudaTol)
		dx, dxP := p.randIn(n, c.off, 1)
		p.both(func(s side) { s.RoPEBackward(s.b(dx), own(s, pos, 0), c.heads, c.hd, c.theta) })
		p.check("RoPEBackward "+name, dxP, cudaTol)
		// Llama 3's frequency factors: each pair's own.
		freqs := make([]float32, c.hd/2)
		for i := range freqs {
			freqs[i] = 1 + 7*float32(i%5)/4
		}
		fr := func(s side) device.FreqRoPE { return s.Device.(device.FreqRoPE) }
		x, xP = p.randIn(n, c.off, 1)
		p.both(func(s side) { fr(s).RoPEFreqs(s.b(x), own(s, pos, 0), c.heads, c.hd, c.theta, own(s, freqs, 0)) })
		p.check("RoPEFreqs "+name, xP, cudaTol)
		dx, dxP = p.randIn(n, c.off, 1)
		p.both(func(s side) {
			fr(s).RoPEFreqsBackward(s.b(dx), own(s, pos, 0), c.heads, c.hd, c.theta, own(s, freqs, 0))
		})
		p.check("RoPEFreqsBackward "+name, dxP, cudaTol)
	}
}

// treeMask is a random mask of rows × pend in which every row sees itself.
func (p *pair) treeMask(rows, pend int) []uint8 {
	m := make([]uint8, rows*pend)
	for j := range rows {
		for i := range pend {
			if p.rng.IntN(2) == 0 {
				m[j*pend+i] = 1
			}
		}
		m[j*pend+pend-rows+j] = 1
	}
	return m
}

func testAttention(p *pair) {
	for _, c := range []struct {
		a     device.Attn
		tree  bool
		views bool
	}{
		{a: device.Attn{Heads: 6, KVHeads: 2, HeadDim: 10, Past: 0, Pend: 37, Rows: 37}},              // training, causal
		{a: device.Attn{Heads: 6, KVHeads: 3, HeadDim: 18, Past: 13, Pend: 29, Rows: 11}},             // causal after pending rows
		{a: device.Attn{Heads: 6, KVHeads: 2, HeadDim: 18, Past: 5, Pend: 23, Rows: 23}, tree: true},  // a draft tree
		{a: device.Attn{Heads: 6, KVHeads: 3, HeadDim: 10, Past: 300, Pend: 17, Rows: 9}, tree: true}, // training-time test
		{a: device.Attn{Heads: 6, KVHeads: 2, HeadDim: 18, Past: 1100, Pend: 7, Rows: 7}},             // keys past a block
		{a: device.Attn{Heads: 4, KVHeads: 1, HeadDim: 128, Past: 40, Pend: 1, Rows: 1}},              // one drafted row
		{a: device.Attn{Heads: 6, KVHeads: 6, HeadDim: 7, Past: 3, Pend: 12, Rows: 5}, tree: true, views: true},
	} {
		a := c.a
		if c.tree {
			a.Mask = p.treeMask(a.Rows, a.Pend)
		}
		name := fmt.Sprintf("Attention %d/%d heads of %d, %d+%d keys, %d rows, tree %v, views %v",
			a.Heads, a.KVHeads, a.HeadDim, a.Past, a.Pend, a.Rows, c.tree, c.views)
		qn, kvn, pn := a.Rows*a.Heads*a.HeadDim, a.Keys()*a.KVHeads*a.HeadDim, a.Rows*a.Heads*a.Keys()
		off := func(i int) int {
			if c.views {
				return i
			}
			return 0
		}
		q, _ := p.randIn(qn, off(1), 1)
		k, _ := p.randIn(kvn, off(3), 1)
		v, _ := p.randIn(kvn, off(5), 1)
		out, outP := p.randIn(qn, off(7), 1)
		// Junk where the weights go: masked ones must be written as 0.
		probs, probsP := p.randIn(pn, off(9), 1)
		p.both(func(s side) {
			at := a
			at.Mask = own(s, a.Mask, 1)
			s.Attention(s.b(out), s.b(probs), s.b(q), s.b(k), s.b(v), at)
		})
		p.check(name+" out", outP, cudaTol)
		p.check(name+" probs", probsP, cudaTol)
		dout, _ := p.randIn(qn, off(2), 1)
		dq, dqP := p.randIn(qn, off(4), 1)
		dk, dkP := p.randIn(kvn, off(6), 1)
		dv, dvP := p.randIn(kvn, off(8), 1)
		p.both(func(s side) {
			at := a
			at.Mask = own(s, a.Mask, 1)
			s.AttentionBackward(s.b(dq), s.b(dk), s.b(dv), s.b(dout), s.b(probs), s.b(q), s.b(k), s.b(v), at)
		})
		p.check(name+" dq", dqP, cudaTolLong)
		p.check(name+" dk", dkP, cudaTolLong)
		p.check(name+" dv", dvP, cudaTolLong)
	}
}

func testLosses(p *pair) {
	for _, c := range []struct{ n, c int }{{7, 129}, {3, 1031}} {
		n, cols := c.n, c.c
		// A scale of c makes the gradients O(1), so that the tolerance's
		// floor of 1 does not hide their errors.
		scale := 0.7 * float32(cols)
		pred, target := p.rand(n*cols, 2), p.rand(n*cols, 2)
		for _, withD := range []bool{false, true} {
			name := fmt.Sprintf("SmoothL1 %d×%d (dpred: %v)", n, cols, withD)
			var dpred twin
			if withD {
				dpred = p.rand(n*cols, 1)
			}
			loss := p.rand(n, 1) // assigned
			p.both(func(s side) { s.SmoothL1(s.b(dpred), s.b(loss), s.b(pred), s.b(target), n, cols, scale) })
			p.check(name+" loss", loss, cudaTol)
			if withD {
				p.check(name+" dpred", dpred, cudaTol)
			}
		}
	}

	for _, c := range []struct{ n, v int }{{9, 1031}, {2, 32003}} {
		n, V := c.n, c.v
		// Each row's top logit stands at least 2 above the rest, at the
		// same token in the target on even rows and at another on odd
		// ones, so that agreement is decided by no near tie.
		lv, tv := p.randf(n*V, 3), p.randf(n*V, 3)
		wantAgree := make([]float32, n)
		for r := range n {
			k := p.rng.IntN(V)
			lv[r*V+k] += 8
			if r%2 == 0 {
				tv[r*V+k] += 8
				wantAgree[r] = 1
			} else {
				tv[r*V+(k+1+p.rng.IntN(V-1))%V] += 8
			}
		}
		logits, target := p.upload(lv), p.upload(tv)
		scale := float32(V) // as for SmoothL1: O(1) gradients
		for _, g := range []struct{ dl, agree bool }{{true, true}, {false, false}, {true, false}, {false, true}} {
			name := fmt.Sprintf("SoftCrossEntropy %d×%d (dlogits: %v, agree: %v)", n, V, g.dl, g.agree)
			var dl, agree twin
			if g.dl {
				dl = p.rand(n*V, 1)
			}
			if g.agree {
				agree = p.rand(n, 1) // assigned: 0 or 1
			}
			loss := p.rand(n, 1)
			p.both(func(s side) {
				s.SoftCrossEntropy(s.b(dl), s.b(loss), s.b(agree), s.b(logits), s.b(target), n, V, scale)
			})
			p.check(name+" loss", loss, cudaTol)
			if g.dl {
				p.check(name+" dlogits", dl, cudaTol)
			}
			if g.agree {
				got, want := p.get(agree)
				compare(p.t, name+" agree (host)", want, wantAgree, 0)
				compare(p.t, name+" agree", got, wantAgree, 0)
			}
		}
	}
}

func testReductions(p *pair) {
	// Millions of positive values too: there a float32 running sum, not
	// the float64 sum documented, is off by more than the tolerance.
	for _, c := range []struct {
		n           int
		scale, bias float64
	}{{1, 1, 0}, {1031, 1, 0}, {100003, 1, 0}, {100003, 1, 1}, {1 << 22, 1, 2}} {
		v := p.randf(c.n, c.scale)
		for i := range v {
			v[i] += float32(c.bias)
		}
		b := p.upload(v)
		x := b
		if c.n > 10 {
			x = p.view(b, 3, c.n-10) // a view at an odd offset
		}
		name := fmt.Sprintf("%d values + %g", x.r.Len(), c.bias)
		if got, want := p.dev.Sum(x.d), p.ref.Sum(x.r); !closeEnough(got, want, 1e-5) {
			p.t.Errorf("Sum of %s = %.12g, want %.12g", name, got, want)
		}
		if got, want := p.dev.SumSquares(x.d), p.ref.SumSquares(x.r); !closeEnough(got, want, 1e-5) {
			p.t.Errorf("SumSquares of %s = %.12g, want %.12g", name, got, want)
		}
	}
}

func testAdamW(p *pair) {
	const n = 1031
	// LR 1e-2 and moments near 1 make the step large enough to compare
	// on its own, beside the parameter it moves.
	hp := device.AdamW{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: 3, GradScale: 0.7}
	for _, decay := range []bool{true, false} {
		name := fmt.Sprintf("AdamWUpdate (decay: %v)", decay)
		pv := p.randf(n, 1)
		vv := p.randf(n, 1)
		for i := range vv {
			vv[i] = 0.1 + 0.9*vv[i]*vv[i] // second moments are ≥ 0
		}
		param, grad, m, v := p.upload(pv), p.rand(n, 1), p.rand(n, 1), p.upload(vv)
		p.both(func(s side) { s.AdamWUpdate(s.b(param), s.b(grad), s.b(m), s.b(v), hp, decay) })
		p.check(name+" param", param, cudaTol)
		p.check(name+" m", m, cudaTol)
		p.check(name+" v", v, cudaTol)
		p.check(name+" grad (unchanged)", grad, 0)
		got, want := p.get(param)
		for i := range got {
			got[i] = (got[i] - pv[i]) / hp.LR
			want[i] = (want[i] - pv[i]) / hp.LR
		}
		compare(p.t, name+" step / LR", got, want, 1e-3)
	}
}

func testConcurrentUse(p *pair) {
	const workers, rounds = 4, 25
	n, in, o := 7, 129, 65
	type job struct {
		xv     []float32
		x, w   twin
		out    twin
		want   []float32
		wantSS float64
	}
	jobs := make([]*job, workers)
	for i := range jobs {
		j := &job{xv: p.randf(n*in, 1)}
		j.x, j.w, j.out = p.upload(j.xv), p.rand(o*in, 1), p.alloc(n*o)
		p.ref.MatMul(j.out.r, j.x.r, j.w.r, n, in, o)
		j.want = make([]float32, n*o)
		p.ref.Download(j.want, j.out.r)
		j.wantSS = p.ref.SumSquares(j.out.r)
		jobs[i] = j
	}
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			got := make([]float32, n*o)
			for r := range rounds {
				p.dev.Zero(j.x.d)
				p.dev.Upload(j.x.d, j.xv)
				p.dev.MatMul(j.out.d, j.x.d, j.w.d, n, in, o)
				p.dev.Download(got, j.out.d)
				if !compare(p.t, fmt.Sprintf("worker %d, round %d: MatMul", i, r), got, j.want, cudaTol) {
					return
				}
				if ss := p.dev.SumSquares(j.out.d); !closeEnough(ss, j.wantSS, 1e-5) {
					p.t.Errorf("worker %d, round %d: SumSquares %.9g, want %.9g", i, r, ss, j.wantSS)
					return
				}
			}
		})
	}
	wg.Wait()
}

// testTopK ranks rows on both devices: the same tokens in the same order
// (ties included: coarse logits tie often, and the lower token goes
// first), log-probabilities within the tolerance.
func testTopK(p *pair) {
	for _, c := range []struct {
		n, v, k int
		scale   float32
		coarse  bool
	}{{1, 32003, 10, 1, false}, {7, 1031, 16, 2, false}, {5, 300, 10, 1, true}, {3, 17, 17, 0.5, true}} {
		vals := p.randf(c.n*c.v, 4)
		if c.coarse {
			for i := range vals {
				vals[i] = float32(math.Round(float64(vals[i])))
			}
		}
		lg := p.upload(vals)
		got, want := make([]topk.Choice, c.n*c.k), make([]topk.Choice, c.n*c.k)
		p.dev.TopK(got, lg.d, c.n, c.v, c.k, c.scale)
		p.ref.TopK(want, lg.r, c.n, c.v, c.k, c.scale)
		for i := range want {
			if got[i].Token != want[i].Token || math.Abs(got[i].LogP-want[i].LogP) > cudaTol*max(1, math.Abs(want[i].LogP)) {
				p.t.Fatalf("TopK %+v: choice %d is %+v, want %+v", c, i, got[i], want[i])
			}
		}
	}
}

// A draft larger than the GPU's memory is an error from NewDraft, not a
// panic.
func TestCUDAOutOfMemoryIsAnError(t *testing.T) {
	dev := cudaOrSkip(t)
	c := draft.Config{Hidden: 1 << 16, Blocks: 1, Heads: 64, KVHeads: 64, HeadDim: 1024, FFN: 1 << 18, Vocab: 8,
		Context: 16, RopeTheta: 10000, RMSEps: 1e-5}
	d, err := dgf.NewDraft(dev, c, dgftest.FakeTarget(rand.New(rand.NewPCG(1, 1)), c.Hidden, c.Vocab))
	var de *device.Error
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "OUT_OF_MEMORY") {
		t.Fatalf("NewDraft of %d GB: %v, %v; want an out-of-memory device.Error", 4*c.Params()>>30, d, err)
	}
}

// cuLib's function fields are filled in cuFn's order, graphLib's in
// graphFn's: one name for each.
func TestCUDADriverTable(t *testing.T) {
	funcs := func(typ reflect.Type) int {
		n := 0
		for n < typ.NumField() && typ.Field(n).Type == reflect.TypeFor[uintptr]() {
			n++
		}
		return n
	}
	if n := funcs(reflect.TypeFor[cuLib]()); n != len(cuFn) {
		t.Errorf("cuLib has %d functions, cuFn names %d", n, len(cuFn))
	}
	if n := reflect.TypeFor[graphLib]().NumField(); n != len(graphFn) || funcs(reflect.TypeFor[graphLib]()) != n {
		t.Errorf("graphLib has %d fields, graphFn names %d functions", n, len(graphFn))
	}
}
