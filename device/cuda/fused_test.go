package cuda

import (
	"fmt"
	"math"
	"testing"

	"dovetail/device"
	"dovetail/models"
	"dovetail/models/synth"
	"dovetail/models/synth/synthtest"
	"dovetail/offload"
	"dovetail/quant"
)

// The fused products of a decoder layer (block.Pass.Forward on a GPU)
// give what their parts give: add + x·Wᵀ into a separate buffer and in
// place, through mmvq and (past mmvRows rows) through tiles;
// SiLU(x·Gᵀ)⊙(x·Uᵀ) in one launch; an RMSNorm whose 8-bit codes the next
// product reads are quantize_q8's of its output.
func TestCUDAFusedProducts(t *testing.T) {
	p := newPair(t, cudaOrSkip(t), 16)
	dev := p.dev
	const rows = 131
	get := func(b device.Buffer) []float32 {
		v := make([]float32, b.Len())
		dev.Download(v, b)
		return v
	}
	put := func(v []float32) device.Buffer {
		b := dev.Alloc(len(v))
		dev.Upload(b, v)
		return b
	}
	for _, bt := range blockTypes {
		g, gw := p.blockMatrix(bt.t, rows, bt.k)
		u, _ := p.blockMatrix(bt.t, rows, bt.k)
		name := fmt.Sprintf("%v %d×%d", bt.t, rows, bt.k)
		for _, n := range []int{1, 5, 9, 64, 65} {
			x, add := put(p.randf(n*bt.k, 1)), p.randf(n*rows, 1)
			plain, sep, inPlace := dev.Alloc(n*rows), dev.Alloc(n*rows), put(add)
			dev.MatMulFrozen(plain, x, g.d, n)
			if !device.MatMulFrozenAdd(dev, sep, x, put(add), g.d, n) || !device.MatMulFrozenAdd(dev, inPlace, x, inPlace, g.d, n) {
				t.Fatalf("%s: MatMulFrozenAdd not fused", name)
			}
			want := get(plain)
			for i := range want {
				want[i] += add[i]
			}
			for what, b := range map[string]device.Buffer{"into another buffer": sep, "in place": inPlace} {
				if i, ok := within(get(b), want, 1e-6); !ok {
					t.Errorf("%s, %d rows, add %s: value %d is %g, want %g", name, n, what, i, get(b)[i], want[i])
				}
			}
			glu := dev.Alloc(n * rows)
			fused := device.MatMulFrozenGLU(dev, glu, x, g.d, u.d, n)
			if wantFused := !blockFormats[bt.t].float && n <= mmvRows; fused != wantFused {
				t.Fatalf("%s, %d rows: MatMulFrozenGLU fused %v, want %v", name, n, fused, wantFused)
			}
			if fused {
				up := dev.Alloc(n * rows)
				dev.MatMulFrozen(up, x, u.d, n)
				gv, uv := get(plain), get(up)
				for i := range gv {
					gv[i] = gv[i] * float32(1/(1+math.Exp(-float64(gv[i])))) * uv[i]
				}
				if i, ok := within(get(glu), gv, 1e-5); !ok {
					t.Errorf("%s, %d rows: GLU value %d is %g, want %g", name, n, i, get(glu)[i], gv[i])
				}
			}
		}
		// A GLU of 256 rows (whole 32s) leaves its output's codes for the
		// down product: they are what quantize_q8 makes of that output.
		if !blockFormats[bt.t].float {
			const R = 256
			g2, _ := p.blockMatrix(bt.t, R, bt.k)
			u2, _ := p.blockMatrix(bt.t, R, bt.k)
			down, dw := p.blockMatrix(bt.t, 37, R)
			for _, n := range []int{1, 9} {
				x, hh, y := put(p.randf(n*bt.k, 1)), dev.Alloc(n*R), dev.Alloc(n*37)
				if !device.MatMulFrozenGLU(dev, hh, x, g2.d, u2.d, n) {
					t.Fatalf("%s: GLU of %d rows not fused", name, R)
				}
				dev.MatMulFrozen(y, hh, down.d, n) // right after: it reads the GLU's codes
				hv := get(hh)
				g, u := dev.Alloc(n*R), dev.Alloc(n*R)
				dev.MatMulFrozen(g, x, g2.d, n)
				dev.MatMulFrozen(u, x, u2.d, n)
				gv, uv := get(g), get(u)
				for i := range gv {
					gv[i] = gv[i] * float32(1/(1+math.Exp(-float64(gv[i])))) * uv[i]
				}
				if i, ok := within(hv, gv, 1e-5); !ok {
					t.Errorf("%s, %d rows: GLU of %d rows, value %d is %g, want %g", name, n, R, i, hv[i], gv[i])
				}
				checkQ8Product(t, fmt.Sprintf("%s after a GLU of %d rows, %d rows", name, R, n), get(y), dw, hv, 37, R, n)
			}
		}
		// An RMSNorm's output read by a product: the codes it left beside
		// it are what quantize_q8 makes of that output.
		for _, n := range []int{1, 7} {
			xs, ws := p.randf(n*bt.k, 2), p.randf(bt.k, 1)
			xn, y := dev.Alloc(n*bt.k), dev.Alloc(n*rows)
			dev.RMSNorm(xn, put(xs), put(ws), n, bt.k, 1e-5)
			dev.MatMulFrozen(y, xn, g.d, n)
			if blockFormats[bt.t].float {
				continue
			}
			checkQ8Product(t, fmt.Sprintf("%s after RMSNorm, %d rows", name, n), get(y), gw, get(xn), rows, bt.k, n)
		}
	}
}

// An attention's output read by a product: where a head is a whole
// number of sub-blocks, the codes it left beside it are quantize_q8's of
// that output.
func TestCUDAAttentionCodes(t *testing.T) {
	p := newPair(t, cudaOrSkip(t), 17)
	dev := p.dev
	const heads, kvHeads, hd, rows = 4, 2, 64, 37
	m, mw := p.blockMatrix(quant.Q8_0, rows, heads*hd)
	for _, n := range []int{1, 5} {
		a := device.Attn{Heads: heads, KVHeads: kvHeads, HeadDim: hd, Past: 6, Pend: n, Rows: n}
		keys := a.Keys()
		q, k, v := p.rand(n*heads*hd, 1), p.rand(keys*kvHeads*hd, 1), p.rand(keys*kvHeads*hd, 1)
		out, probs, y := dev.Alloc(n*heads*hd), dev.Alloc(n*heads*keys), dev.Alloc(n*rows)
		dev.Attention(out, probs, q.d, k.d, v.d, a)
		dev.MatMulFrozen(y, out, m.d, n)
		got, xs := make([]float32, n*rows), make([]float32, n*heads*hd)
		dev.Download(got, y)
		dev.Download(xs, out)
		checkQ8Product(t, fmt.Sprintf("the product after attention, %d rows", n), got, mw, xs, rows, heads*hd, n)
	}
}

// Three products of one x in one launch (a layer's Q, K and V) equal the
// three on their own, each matrix in its own format: the blocks' formats
// of this package, and Q4_K_M's Q4_K, Q4_K and Q6_K.
func TestCUDAProducts3(t *testing.T) {
	p := newPair(t, cudaOrSkip(t), 18)
	dev := p.dev
	sets := [][3]quant.Type{{quant.Q4_K, quant.Q4_K, quant.Q6_K}, {quant.IQ4_XS, quant.Q8_0, quant.Q5_K}}
	for _, bt := range blockTypes {
		if !blockFormats[bt.t].float {
			sets = append(sets, [3]quant.Type{bt.t, bt.t, bt.t})
		}
	}
	k := 256
	for _, set := range sets {
		rows := [3]int{131, 37, 64}
		var ms [3]device.Matrix
		for i, typ := range set {
			m, _ := p.blockMatrix(typ, rows[i], k)
			ms[i] = m.d
		}
		for _, n := range []int{1, 8, 13} {
			x := dev.Alloc(n * k)
			dev.Upload(x, p.randf(n*k, 1))
			var fused, alone [3]device.Buffer
			for i := range ms {
				fused[i], alone[i] = dev.Alloc(n*rows[i]), dev.Alloc(n*rows[i])
				dev.MatMulFrozen(alone[i], x, ms[i], n)
			}
			if !device.MatMulFrozen3(dev, fused, x, ms, n) {
				t.Fatalf("%v: not fused", set)
			}
			for i := range ms {
				got, want := make([]float32, n*rows[i]), make([]float32, n*rows[i])
				dev.Download(got, fused[i])
				dev.Download(want, alone[i])
				if j, ok := within(got, want, 0); !ok {
					t.Errorf("%v, %d rows, matrix %d: value %d is %g, alone %g", set, n, i, j, got[j], want[j])
				}
			}
		}
	}
}

// within reports the first index where got and want differ by more than
// tol relative to want's largest magnitude.
func within(got, want []float32, tol float64) (int, bool) {
	var scale float64
	for _, v := range want {
		scale = max(scale, math.Abs(float64(v)))
	}
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > tol*scale {
			return i, false
		}
	}
	return 0, true
}

// A decoder layer of the target's offloaded layers costs, in a decode
// step, 9 launches, where each operation on its own took 21: its
// attention's RMSNorm with the 8-bit codes its Q, K and V read; the three
// products in one; the RoPE of the queries and keys; the store of the
// keys and values into the cache in halves; the attention with its
// output's codes; the output product with the residual add; the FFN's
// RMSNorm with its codes; gate and up with SwiGLU and its output's codes;
// the down product with the residual add. Where a head is not whole
// 32-value sub-blocks, the attention's output is quantized on its own: 10.
func TestCUDALayerLaunches(t *testing.T) {
	dev := cudaOrSkip(t).(*cudaDev)
	for _, c := range []struct {
		shape string // synth's
		want  int
	}{{"dim=64,layers=3,heads=4,kv=2,ffn=128,vocab=300", 10}, {"dim=256,layers=3,heads=4,kv=2,ffn=512,vocab=300", 9}} {
		m := synthModel(t, c.shape, quant.Q4_K)
		if got := layerLaunches(t, dev, m); got > float64(c.want) {
			t.Errorf("%s: %.1f launches a decoder layer, want at most %d", c.shape, got, c.want)
		}
	}
}

// synthModel is a model of synth's shape (its -shape syntax) with random
// weights of type typ, closed at the test's end.
func synthModel(t *testing.T, shape string, typ quant.Type) *models.Llama {
	return synthtest.Model(t, synthtest.Shape(t, shape), synth.Options{Type: typ, Seed: 1})
}

// layerLaunches is how many kernels a decoder layer of m launches in a
// decode step on dev.
func layerLaunches(t *testing.T, dev *cudaDev, m *models.Llama) float64 {
	c := m.Config
	count := func(from int) int {
		l, err := offload.New(dev, m, from)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Free()
		s, err := l.NewSeq(16)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Free()
		x, hidden, logits := make([]float32, c.Hidden), make([]float32, c.Hidden), make([]float32, c.Vocab)
		for i := range x {
			x[i] = float32(i%7) - 3
		}
		// The first step sizes the scratch; the second is counted.
		if err := s.Forward(x, 1, []int{0}, 0, 0, nil, 0, hidden, logits); err != nil {
			t.Fatal(err)
		}
		before := dev.kernels
		if err := s.Forward(x, 1, []int{1}, 1, 0, nil, 0, hidden, logits); err != nil {
			t.Fatal(err)
		}
		return dev.kernels - before
	}
	all, last := count(0), count(c.Layers-1)
	perLayer := float64(all-last) / float64(c.Layers-1)
	t.Logf("%s, head dimension %d: %d launches with %d layers on the device, %d with 1: %.1f a layer",
		dev.Name(), c.HeadDim, all, c.Layers, last, perLayer)
	return perLayer
}
