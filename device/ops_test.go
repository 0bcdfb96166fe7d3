package device

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"dovetail/dgf/dgftest"
	"dovetail/models"
	"dovetail/quant"
)

// Gradient checks: every backward operation against central finite
// differences of its forward operation, in float64 on small random shapes.
// The scalar checked is L = Σ r ⊙ out for random r (so dout = r), and
// gradient buffers start from random values, so that a backward that
// assigns instead of accumulating fails too.

const (
	fdEps = 1e-6
	fdTol = 1e-6
)

// buf makes a float64 buffer holding v.
func buf(h *host[float64], v []float64) Buffer {
	return &hostBuf[float64]{d: append([]float64(nil), v...)}
}

func vals(b Buffer) []float64 { return b.(*hostBuf[float64]).d }

// gradCheck checks the gradients of L = Σ weights ⊙ out with respect to
// each input in wrt. fwd recomputes out from the inputs; bwd accumulates
// the gradients for dout = weights into grads (one per input, nil where
// not checked).
func gradCheck(t *testing.T, name string, rng *rand.Rand, ins []Buffer, wrt []bool, out Buffer, weights []float64,
	fwd func(), bwd func(dout Buffer, grads []Buffer)) {
	t.Helper()
	fwd()
	if weights == nil {
		weights = dgftest.RandVals(rng, out.Len(), 1)
	}
	loss := func() float64 {
		fwd()
		var s float64
		for i, v := range vals(out) {
			s += weights[i] * v
		}
		return s
	}
	grads := make([]Buffer, len(ins))
	start := make([][]float64, len(ins))
	for i, in := range ins {
		if wrt[i] {
			start[i] = dgftest.RandVals(rng, in.Len(), 1)
			grads[i] = &hostBuf[float64]{d: append([]float64(nil), start[i]...)}
		}
	}
	bwd(&hostBuf[float64]{d: append([]float64(nil), weights...)}, grads)
	for i, in := range ins {
		if !wrt[i] {
			continue
		}
		x := vals(in)
		worst := 0.0
		for j := range x {
			num := dgftest.CentralDiff(x, j, fdEps, loss)
			ana := vals(grads[i])[j] - start[i][j]
			err := math.Abs(num-ana) / max(1, math.Abs(num), math.Abs(ana))
			worst = max(worst, err)
			if err > fdTol {
				t.Errorf("%s: input %d [%d]: backward %.9g, finite differences %.9g", name, i, j, ana, num)
				return
			}
		}
		t.Logf("%s: input %d: %d values, worst relative error %.2g", name, i, len(x), worst)
	}
}

func TestGradMatMul(t *testing.T) {
	h, rng := newHost[float64](HostConfig{Threads: 2}), rand.New(rand.NewPCG(1, 1))
	n, in, o := 5, 7, 6
	x, w, out := buf(h, dgftest.RandVals(rng, n*in, 1)), buf(h, dgftest.RandVals(rng, o*in, 1)), h.Alloc(n*o)
	gradCheck(t, "MatMul", rng, []Buffer{x, w}, []bool{true, true}, out, nil,
		func() { h.MatMul(out, x, w, n, in, o) },
		func(d Buffer, g []Buffer) { h.MatMulBackward(g[0], g[1], d, x, w, n, in, o) })
}

func TestGradMatMulFrozen(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 1))
	// More rows than a chunk, so that chunking and the per-worker sums run.
	n, rows, cols := 3, frozenChunk*2+5, 32
	for _, tc := range []*models.Tensor{
		dgftest.F32Tensor("f32", rows, cols, dgftest.RandVals(rng, rows*cols, 1)),
		dgftest.Q8Tensor("q8_0", rows, cols, dgftest.RandVals(rng, rows*cols, 1)),
	} {
		h := newHost[float64](HostConfig{Threads: 2})
		m, err := h.UploadMatrix(tc)
		if err != nil {
			t.Fatal(err)
		}
		x, out := buf(h, dgftest.RandVals(rng, n*cols, 1)), h.Alloc(n*rows)
		gradCheck(t, "MatMulFrozen "+tc.Name, rng, []Buffer{x}, []bool{true}, out, nil,
			func() { h.MatMulFrozen(out, x, m, n) },
			func(d Buffer, g []Buffer) { h.MatMulFrozenBackward(g[0], d, m, n) })
	}
}

func TestGradRMSNorm(t *testing.T) {
	h, rng := newHost[float64](HostConfig{Threads: 2}), rand.New(rand.NewPCG(3, 1))
	n, c := 4, 9
	x, w, out := buf(h, dgftest.RandVals(rng, n*c, 2)), buf(h, dgftest.RandVals(rng, c, 1)), h.Alloc(n*c)
	gradCheck(t, "RMSNorm", rng, []Buffer{x, w}, []bool{true, true}, out, nil,
		func() { h.RMSNorm(out, x, w, n, c, 1e-5) },
		func(d Buffer, g []Buffer) { h.RMSNormBackward(g[0], g[1], d, x, w, n, c, 1e-5) })
}

func TestGradPointwise(t *testing.T) {
	h, rng := newHost[float64](HostConfig{Threads: 2}), rand.New(rand.NewPCG(4, 1))
	const n = 23
	a, b, z, out := buf(h, dgftest.RandVals(rng, n, 3)), buf(h, dgftest.RandVals(rng, n, 3)), buf(h, dgftest.RandVals(rng, n, 3)), h.Alloc(n)
	gradCheck(t, "SiLU", rng, []Buffer{a}, []bool{true}, out, nil,
		func() { h.SiLU(out, a) },
		func(d Buffer, g []Buffer) { h.SiLUBackward(g[0], d, a) })
	gradCheck(t, "SwiGLU", rng, []Buffer{a, b}, []bool{true, true}, out, nil,
		func() { h.SwiGLU(out, a, b) },
		func(d Buffer, g []Buffer) { h.SwiGLUBackward(g[0], g[1], d, a, b) })
	gradCheck(t, "Gate", rng, []Buffer{z, a, b}, []bool{true, true, true}, out, nil,
		func() { h.Gate(out, z, a, b) },
		func(d Buffer, g []Buffer) { h.GateBackward(g[0], g[1], g[2], d, z, a, b) })
	gradCheck(t, "Add", rng, []Buffer{a, b}, []bool{true, true}, out, nil,
		func() { h.Add(out, a, b) },
		func(d Buffer, g []Buffer) { addTo(vals(g[0]), vals(d)); addTo(vals(g[1]), vals(d)) })
	rows, ca, cb := 3, 4, 5
	x, y, cat := buf(h, dgftest.RandVals(rng, rows*ca, 1)), buf(h, dgftest.RandVals(rng, rows*cb, 1)), h.Alloc(rows*(ca+cb))
	gradCheck(t, "Concat", rng, []Buffer{x, y}, []bool{true, true}, cat, nil,
		func() { h.Concat(cat, x, y, rows, ca, cb) },
		func(d Buffer, g []Buffer) { h.ConcatBackward(g[0], g[1], d, rows, ca, cb) })
}

func TestGradRoPE(t *testing.T) {
	h, rng := newHost[float64](HostConfig{Threads: 2}), rand.New(rand.NewPCG(5, 1))
	heads, hd := 3, 6
	pos := []int{0, 5, 17, 300}
	x, out := buf(h, dgftest.RandVals(rng, len(pos)*heads*hd, 1)), h.Alloc(len(pos)*heads*hd)
	gradCheck(t, "RoPE", rng, []Buffer{x}, []bool{true}, out, nil,
		func() { h.Copy(out, x); h.RoPE(out, pos, heads, hd, 10000) },
		func(d Buffer, g []Buffer) {
			// RoPEBackward works in place: rotate a copy of dout, then add.
			tmp := buf(h, vals(d))
			h.RoPEBackward(tmp, pos, heads, hd, 10000)
			addTo(vals(g[0]), vals(tmp))
		})
}

func TestGradAttention(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 1))
	tree := []uint8{ // 4 pending keys, the last 3 are queries
		1, 1, 0, 0,
		1, 0, 1, 0,
		1, 1, 0, 1,
	}
	for _, a := range []Attn{
		{Heads: 4, KVHeads: 2, HeadDim: 4, Past: 0, Pend: 5, Rows: 5},             // training: causal
		{Heads: 4, KVHeads: 1, HeadDim: 2, Past: 3, Pend: 4, Rows: 3, Mask: tree}, // drafting: cache + tree
		{Heads: 2, KVHeads: 2, HeadDim: 4, Past: 2, Pend: 6, Rows: 3},             // causal after pending rows
	} {
		h := newHost[float64](HostConfig{Threads: 2})
		q := buf(h, dgftest.RandVals(rng, a.Rows*a.Heads*a.HeadDim, 1))
		k := buf(h, dgftest.RandVals(rng, a.Keys()*a.KVHeads*a.HeadDim, 1))
		v := buf(h, dgftest.RandVals(rng, a.Keys()*a.KVHeads*a.HeadDim, 1))
		out, probs := h.Alloc(a.Rows*a.Heads*a.HeadDim), h.Alloc(a.Rows*a.Heads*a.Keys())
		gradCheck(t, fmt.Sprintf("Attention %+v", a), rng, []Buffer{q, k, v}, []bool{true, true, true}, out, nil,
			func() { h.Attention(out, probs, q, k, v, a) },
			func(d Buffer, g []Buffer) { h.AttentionBackward(g[0], g[1], g[2], d, probs, q, k, v, a) })
		// Masked keys get no weight.
		p := vals(probs)
		for j := range a.Rows {
			for hh := range a.Heads {
				for key := range a.Keys() {
					w := p[(j*a.Heads+hh)*a.Keys()+key]
					if a.visible(j, key) != (w > 0) {
						t.Errorf("%+v: row %d head %d key %d: weight %g, visible %v", a, j, hh, key, w, a.visible(j, key))
					}
				}
			}
		}
	}
}

func TestGradLosses(t *testing.T) {
	h, rng := newHost[float64](HostConfig{Threads: 2}), rand.New(rand.NewPCG(7, 1))
	n, c, v := 3, 8, 11
	const scale = 0.7
	pred, target, loss := buf(h, dgftest.RandVals(rng, n*c, 2)), buf(h, dgftest.RandVals(rng, n*c, 2)), h.Alloc(n)
	ones := []float64{scale, scale, scale}
	gradCheck(t, "SmoothL1", rng, []Buffer{pred}, []bool{true}, loss, ones,
		func() { h.SmoothL1(nil, loss, pred, target, n, c, scale) },
		func(_ Buffer, g []Buffer) { h.SmoothL1(g[0], loss, pred, target, n, c, scale) })
	logits, tlogits, agree := buf(h, dgftest.RandVals(rng, n*v, 3)), buf(h, dgftest.RandVals(rng, n*v, 3)), h.Alloc(n)
	gradCheck(t, "SoftCrossEntropy", rng, []Buffer{logits}, []bool{true}, loss, ones,
		func() { h.SoftCrossEntropy(nil, loss, agree, logits, tlogits, n, v, scale) },
		func(_ Buffer, g []Buffer) { h.SoftCrossEntropy(g[0], loss, agree, logits, tlogits, n, v, scale) })
	// Agreement: equal logits agree, and the loss is then the entropy.
	h.SoftCrossEntropy(nil, loss, agree, logits, logits, n, v, 1)
	for r := range n {
		if vals(agree)[r] != 1 {
			t.Errorf("row %d: identical logits do not agree", r)
		}
	}
}

// AdamW against the textbook update, two steps.
func TestAdamW(t *testing.T) {
	h := newHost[float64](HostConfig{Threads: 1})
	p, g := buf(h, []float64{1, -2, 0.5}), buf(h, []float64{0.1, 0.3, -4})
	m, v := h.Alloc(3), h.Alloc(3)
	want := []float64{1, -2, 0.5}
	wm, wv := make([]float64, 3), make([]float64, 3)
	for step := 1; step <= 2; step++ {
		hp := AdamW{LR: 0.01, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, Step: step, GradScale: 0.5}
		h.AdamWUpdate(p, g, m, v, hp, true)
		for i := range want {
			gi := vals(g)[i] * 0.5
			wm[i] = 0.9*wm[i] + 0.1*gi
			wv[i] = 0.95*wv[i] + 0.05*gi*gi
			mh := wm[i] / (1 - math.Pow(0.9, float64(step)))
			vh := wv[i] / (1 - math.Pow(0.95, float64(step)))
			want[i] -= 0.01 * 0.1 * want[i]
			want[i] -= 0.01 * mh / (math.Sqrt(vh) + float64(float32(1e-8)))
		}
	}
	for i := range want {
		if math.Abs(vals(p)[i]-want[i]) > 1e-9 {
			t.Errorf("param %d: %.12g, want %.12g", i, vals(p)[i], want[i])
		}
	}
}

// The float32 device (kernels' matmul) agrees with the float64 one.
func TestHostFloat32MatchesFloat64(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 1))
	h32, h64 := newHost[float32](HostConfig{Threads: 2}), newHost[float64](HostConfig{Threads: 2})
	n, in, o := 9, 64, 33
	xv, wv, dv := dgftest.RandVals(rng, n*in, 1), dgftest.RandVals(rng, o*in, 1), dgftest.RandVals(rng, n*o, 1)
	f32 := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	up32 := func(v []float64) Buffer { b := h32.Alloc(len(v)); h32.Upload(b, f32(v)); return b }
	x32, w32, d32, out32 := up32(xv), up32(wv), up32(dv), h32.Alloc(n*o)
	dx32, dw32 := h32.Alloc(n*in), h32.Alloc(o*in)
	x64, w64, d64, out64 := buf(h64, xv), buf(h64, wv), buf(h64, dv), h64.Alloc(n*o)
	dx64, dw64 := h64.Alloc(n*in), h64.Alloc(o*in)
	h32.MatMul(out32, x32, w32, n, in, o)
	h64.MatMul(out64, x64, w64, n, in, o)
	h32.MatMulBackward(dx32, dw32, d32, x32, w32, n, in, o)
	h64.MatMulBackward(dx64, dw64, d64, x64, w64, n, in, o)
	// Frozen matrices: the float32 device's transposed copy against the
	// float64 device's chunks.
	rows := 3*frozenChunk + 7
	tq := dgftest.Q8Tensor("q", rows, in, dgftest.RandVals(rng, rows*in, 1))
	m32, _ := h32.UploadMatrix(tq)
	m64, _ := h64.UploadMatrix(tq)
	fo32, fo64 := h32.Alloc(n*rows), h64.Alloc(n*rows)
	h32.MatMulFrozen(fo32, x32, m32, n)
	h64.MatMulFrozen(fo64, x64, m64, n)
	fd := dgftest.RandVals(rng, n*rows, 1)
	fdx32, fdx64 := h32.Alloc(n*in), h64.Alloc(n*in)
	h32.MatMulFrozenBackward(fdx32, up32(fd), m32, n)
	h64.MatMulFrozenBackward(fdx64, buf(h64, fd), m64, n)
	for _, pair := range []struct {
		name string
		a    Buffer
		b    Buffer
	}{{"out", out32, out64}, {"dx", dx32, dx64}, {"dw", dw32, dw64}, {"frozen out", fo32, fo64}, {"frozen dx", fdx32, fdx64}} {
		got := make([]float32, pair.a.Len())
		h32.Download(got, pair.a)
		for i, want := range vals(pair.b) {
			if math.Abs(float64(got[i])-want) > 1e-4*max(1, math.Abs(want)) {
				t.Fatalf("%s[%d]: float32 %g, float64 %g", pair.name, i, got[i], want)
			}
		}
	}
}

// A frozen matrix too large to hold as floats (an LM head) is multiplied
// by the CPU kernels in its own format on the float32 device: the result is
// the exact product up to the activations' rounding to the format the
// kernels pair with the weights' (Q8_0 blocks of 32, Q8_K blocks of 256,
// f16 or bf16).
func TestMatMulFrozenLargeMatrix(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 2))
	const n, cols = 3, 256
	rows := DefaultFloat32Upto/cols + 5
	xv := dgftest.RandVals(rng, n*cols, 1)
	wv := make([]float32, rows*cols)
	for i := range wv {
		wv[i] = float32(rng.NormFloat64())
	}
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_0, quant.Q6_K, quant.F16, quant.BF16} {
		rb, _ := typ.RowSize(cols)
		data := make([]byte, rows*rb)
		for r := range rows {
			if err := quant.QuantizeRow(typ, data[r*rb:(r+1)*rb], wv[r*cols:(r+1)*cols]); err != nil {
				t.Fatal(err)
			}
		}
		tq := &models.Tensor{Name: "head", Type: typ, Rows: rows, Cols: cols, RowBytes: rb, Data: data}
		h32, h64 := newHost[float32](HostConfig{Threads: 2}), newHost[float64](HostConfig{Threads: 2})
		m32, err := h32.UploadMatrix(tq)
		if err != nil {
			t.Fatal(err)
		}
		if h32.mat(m32).f32 != nil {
			t.Fatalf("a %d × %d matrix was dequantized whole", rows, cols)
		}
		m64, _ := h64.UploadMatrix(tq)
		x32 := h32.Alloc(n * cols)
		x32f := make([]float32, len(xv))
		for i, v := range xv {
			x32f[i] = float32(v)
		}
		h32.Upload(x32, x32f)
		o32, o64 := h32.Alloc(n*rows), h64.Alloc(n*rows)
		h32.MatMulFrozen(o32, x32, m32, n)
		h64.MatMulFrozen(o64, buf(h64, xv), m64, n)
		got := make([]float32, n*rows)
		h32.Download(got, o32)
		// How far each activation may move: half a step of its block's
		// scale, amax/127, or a relative rounding of f16 or bf16.
		moved := make([]float64, n*cols)
		for j := 0; j < n; j++ {
			x := xv[j*cols : (j+1)*cols]
			switch typ {
			case quant.F16, quant.BF16:
				rel := 0x1p-11
				if typ == quant.BF16 {
					rel = 0x1p-8
				}
				for c, v := range x {
					moved[j*cols+c] = math.Abs(v) * rel
				}
			default:
				blk := quant.QK
				if typ == quant.Q6_K {
					blk = quant.QKK
				}
				for b := 0; b < cols; b += blk {
					var amax float64
					for _, v := range x[b : b+blk] {
						amax = max(amax, math.Abs(v))
					}
					for c := b; c < b+blk; c++ {
						moved[j*cols+c] = amax / 127 / 2 * 1.01
					}
				}
			}
		}
		w := make([]float32, cols)
		for r := 0; r < rows; r++ {
			quant.DequantizeRow(typ, w, tq.Row(r))
			for j := 0; j < n; j++ {
				var bound, mag float64
				for c := range w {
					bound += math.Abs(float64(w[c])) * moved[j*cols+c]
					mag += math.Abs(float64(w[c]) * xv[j*cols+c])
				}
				bound += 1e-5*mag + 1e-4
				want := vals(o64)[j*rows+r]
				if d := math.Abs(float64(got[j*rows+r]) - want); d > bound {
					t.Fatalf("%v: row %d, output %d: %g, exact %g (off by %g > %g)", typ, j, r, got[j*rows+r], want, d, bound)
				}
			}
		}
	}
}

func TestGradRoPEFreqs(t *testing.T) {
	h, rng := newHost[float64](HostConfig{Threads: 2}), rand.New(rand.NewPCG(5, 2))
	heads, hd := 2, 6
	pos := []int{0, 3, 900}
	freqs := []float32{1, 2.5, 8}
	x, out := buf(h, dgftest.RandVals(rng, len(pos)*heads*hd, 1)), h.Alloc(len(pos)*heads*hd)
	gradCheck(t, "RoPEFreqs", rng, []Buffer{x}, []bool{true}, out, nil,
		func() { h.Copy(out, x); h.RoPEFreqs(out, pos, heads, hd, 10000, freqs) },
		func(d Buffer, g []Buffer) {
			tmp := buf(h, vals(d))
			h.RoPEFreqsBackward(tmp, pos, heads, hd, 10000, freqs)
			addTo(vals(g[0]), vals(tmp))
		})
}

// TestRoPEFreqsDividesEachPair checks the frequency factors by hand: pair
// j of a row (1, 0) turns to (cos a, sin a) with a = p·θ^(−2j/hd)/f_j,
// and factors of one are plain RoPE.
func TestRoPEFreqsDividesEachPair(t *testing.T) {
	h := newHost[float64](HostConfig{Threads: 1})
	hd, p, theta := 6, 41, float32(500000)
	freqs := []float32{1, 3, 8}
	row := []float64{1, 0, 1, 0, 1, 0}
	x := buf(h, row)
	h.RoPEFreqs(x, []int{p}, 1, hd, theta, freqs)
	got := vals(x)
	for j := range hd / 2 {
		a := float64(p) * math.Pow(float64(theta), -2*float64(j)/float64(hd)) / float64(freqs[j])
		if math.Abs(got[2*j]-math.Cos(a)) > 1e-12 || math.Abs(got[2*j+1]-math.Sin(a)) > 1e-12 {
			t.Fatalf("pair %d: got (%g, %g), want (%g, %g)", j, got[2*j], got[2*j+1], math.Cos(a), math.Sin(a))
		}
	}
	plain, ones := buf(h, row), buf(h, row)
	h.RoPE(plain, []int{p}, 1, hd, theta)
	h.RoPEFreqs(ones, []int{p}, 1, hd, theta, []float32{1, 1, 1})
	for i, v := range vals(plain) {
		if vals(ones)[i] != v {
			t.Fatalf("factors of one: value %d is %g, plain RoPE %g", i, vals(ones)[i], v)
		}
	}
}
