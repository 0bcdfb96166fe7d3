package cuda

import (
	"fmt"
	"math"
	"testing"

	"dovetail/device"
	"dovetail/models"
	"dovetail/quant"
)

// TestBlockFormatsAreTheDevicesOwn: the CUDA device has kernels for
// exactly the formats device.GPUKeepsBlocks names, which is what a
// placement counts at their file bytes.
func TestBlockFormatsAreTheDevicesOwn(t *testing.T) {
	for typ := range quant.Type(64) {
		_, ok := blockFormats[typ]
		if ok != device.GPUKeepsBlocks(typ) {
			t.Errorf("%v: kernels %v, device.GPUKeepsBlocks %v", typ, ok, device.GPUKeepsBlocks(typ))
		}
	}
}

// TestCUDABlockMatrices checks every format the GPU keeps in its blocks:
// rows gathered, and products for every tree size against what the 8-bit
// activations make exactly (float formats: the host's float product),
// past mmvRows through dequantized tiles, and the backward product.
func TestCUDABlockMatrices(t *testing.T) {
	p := newPair(t, cudaOrSkip(t), 13)
	sizes, rows := []int{}, 1031
	for n := 1; n <= mmvRows; n++ {
		sizes = append(sizes, n)
	}
	if cudaShared.emulated {
		// The emulator runs every thread on the CPU: the sizes at the
		// edges of a launch's mmvCols rows, and fewer weight rows (still
		// not a whole number of a block's mmvWarps).
		sizes, rows = []int{1, 2, 3, 7, 8, 9, 15, 16, 17, 33, 63, 64}, 131
	}
	sizes = append(sizes, mmvRows+1, 130)
	for _, bt := range blockTypes {
		m, w := p.blockMatrix(bt.t, rows, bt.k)
		name := fmt.Sprintf("%v %d×%d", bt.t, rows, bt.k)
		tokens := []int{rows - 1, 0, 3, rows - 32, 3, 64, 65}
		emb, embP := p.randIn(len(tokens)*bt.k, 3, 1)
		p.both(func(s side) { s.Embed(s.b(emb), s.m(m), own(s, tokens, 0)) })
		p.check("Embed "+name, embP, 1e-6) // the GPU may fuse d·q − m
		for _, n := range sizes {
			xs := p.randf(n*bt.k, 1)
			x := p.upload(xs)
			out := p.rand(n*rows, 1)
			p.both(func(s side) { s.MatMulFrozen(s.b(out), s.b(x), s.m(m), n) })
			what := fmt.Sprintf("MatMulFrozen %s, %d rows", name, n)
			if f := blockFormats[bt.t]; f.float || n > mmvRows {
				p.check(what, out, tolFor(bt.k))
				continue
			}
			got := make([]float32, n*rows)
			p.dev.Download(got, out.d)
			checkQ8Product(t, what, got, w, xs, rows, bt.k, n)
		}
		n := 5
		dx, dout := p.rand(n*bt.k, 1), p.rand(n*rows, 1)
		p.both(func(s side) { s.MatMulFrozenBackward(s.b(dx), s.b(dout), s.m(m), n) })
		p.check("MatMulFrozenBackward "+name, dx, tolFor(rows))
	}
}

// blockMatrix is a rows×k matrix of Gaussian values stored as typ on both
// devices, and its dequantized values.
func (p *pair) blockMatrix(typ quant.Type, rows, k int) (twinMat, []float32) {
	rb, err := typ.RowSize(k)
	if err != nil {
		p.t.Fatal(err)
	}
	data, w := make([]byte, rows*rb), make([]float32, rows*k)
	for r := range rows {
		for i := range k {
			w[r*k+i] = float32(p.rng.NormFloat64())
		}
		if err := quant.QuantizeRow(typ, data[r*rb:(r+1)*rb], w[r*k:(r+1)*k]); err != nil {
			p.t.Fatal(err)
		}
		if err := quant.DequantizeRow(typ, w[r*k:(r+1)*k], data[r*rb:(r+1)*rb]); err != nil {
			p.t.Fatal(err)
		}
	}
	t := &models.Tensor{Name: typ.String(), Type: typ, Rows: rows, Cols: k, RowBytes: rb, Data: data}
	return p.matrix(t), w
}

// checkQ8Product compares got [n×rows] with w·x computed in float64 from
// x quantized as quantize_q8 quantizes it: the device's integer sums are
// exact, so only the scales' float32 rounding and the order of the sum
// remain.
func checkQ8Product(t *testing.T, what string, got, w, x []float32, rows, k, n int) {
	t.Helper()
	bad := 0
	for c := range n {
		xq, ds := quantizeQ8(x[c*k : (c+1)*k])
		for r := range rows {
			var want, mag float64
			for i := range k {
				v := float64(w[r*k+i]) * float64(ds[2*(i/32)]) * float64(xq[i])
				want += v
				mag += math.Abs(v)
			}
			if g := float64(got[c*rows+r]); math.Abs(g-want) > 1e-5*mag+1e-6 {
				if bad == 0 {
					t.Errorf("%s: row %d of x, row %d of W: %g, want %g", what, c, r, g, want)
				}
				bad++
			}
		}
	}
	if bad > 1 {
		t.Errorf("%s: %d values off", what, bad)
	}
}

// A draft re-freezing its weights puts the new values into its matrix
// (device.UpdateMatrix) rather than a new one each time; FreeMatrix gives
// the memory back.
func TestCUDAUpdateMatrix(t *testing.T) {
	p := newPair(t, cudaOrSkip(t), 14)
	const rows, k, n = 300, 96, 3
	a, _ := p.blockMatrix(quant.Q8_0, rows, k)
	tb := &models.Tensor{Name: "b", Type: quant.Q8_0, Rows: rows, Cols: k, RowBytes: 102,
		Data: make([]byte, rows*102)}
	for r := range rows {
		if err := quant.QuantizeRow(quant.Q8_0, tb.Data[r*102:(r+1)*102], p.randf(k, 1)); err != nil {
			t.Fatal(err)
		}
	}
	b := p.matrix(tb)
	if ok, err := device.UpdateMatrix(p.dev, a.d, tb); !ok || err != nil {
		t.Fatalf("UpdateMatrix: %v, %v", ok, err)
	}
	x := p.rand(n*k, 1)
	outA, outB := p.rand(n*rows, 1), p.rand(n*rows, 1)
	p.dev.MatMulFrozen(outA.d, x.d, a.d, n)
	p.dev.MatMulFrozen(outB.d, x.d, b.d, n)
	got, want := make([]float32, n*rows), make([]float32, n*rows)
	p.dev.Download(got, outA.d)
	p.dev.Download(want, outB.d)
	compare(t, "the updated matrix's product", got, want, 0)
	wrong := &models.Tensor{Name: "wrong", Type: quant.Q4_0, Rows: rows, Cols: k, RowBytes: 54, Data: make([]byte, rows*54)}
	if _, err := device.UpdateMatrix(p.dev, a.d, wrong); err == nil {
		t.Error("UpdateMatrix took a Q4_0 tensor into a Q8_0 matrix")
	}
	free0, _ := p.dev.MemInfo()
	big, _ := p.blockMatrix(quant.Q8_0, 8192, 1024) // 8.5 MB: past the allocator's granularity
	device.FreeMatrix(p.dev, a.d)
	device.FreeMatrix(p.dev, big.d)
	if free1, _ := p.dev.MemInfo(); free1 < free0 {
		t.Errorf("free memory %d after FreeMatrix, %d before the matrices", free1, free0)
	}
}

// Products that read the same activations in a row share one 8-bit form
// of them (a layer's Q, K and V): the second reads it, and one after x
// changed does not.
func TestCUDAQuantizedOnce(t *testing.T) {
	p := newPair(t, cudaOrSkip(t), 16)
	const rows, k, n = 300, 256, 3
	a, wa := p.blockMatrix(quant.Q4_K, rows, k)
	b, wb := p.blockMatrix(quant.Q6_K, rows, k)
	xs := p.randf(n*k, 1)
	x := p.upload(xs)
	outA, outB := p.rand(n*rows, 1), p.rand(n*rows, 1)
	p.dev.MatMulFrozen(outA.d, x.d, a.d, n)
	p.dev.MatMulFrozen(outB.d, x.d, b.d, n) // the memo's
	got := make([]float32, n*rows)
	p.dev.Download(got, outA.d)
	checkQ8Product(t, "the first product", got, wa, xs, rows, k, n)
	p.dev.Download(got, outB.d)
	checkQ8Product(t, "the second, on the same 8-bit activations", got, wb, xs, rows, k, n)
	xs2 := p.randf(n*k, 1)
	p.dev.Upload(x.d, xs2)
	p.dev.MatMulFrozen(outB.d, x.d, b.d, n)
	p.dev.Download(got, outB.d)
	checkQ8Product(t, "a product after x changed", got, wb, xs2, rows, k, n)
}

// The memo holds activations for the operation right after the one that
// made or kept them, and for the same x and shape only.
func TestQ8MemoHolds(t *testing.T) {
	q := q8Memo{x: 4096, n: 3, k: 256, ops: 7}
	for _, c := range []struct {
		x     uint64
		n, k  int
		ops   int
		holds bool
	}{
		{4096, 3, 256, 8, true}, {4096, 3, 256, 9, false}, {4096, 3, 256, 7, false},
		{8192, 3, 256, 8, false}, {4096, 2, 256, 8, false}, {4096, 3, 512, 8, false},
	} {
		if got := q.holds(c.x, c.n, c.k, c.ops); got != c.holds {
			t.Errorf("holds(%d, %d, %d, %d) = %v", c.x, c.n, c.k, c.ops, got)
		}
	}
	if (q8Memo{}).holds(0, 0, 0, 1) {
		t.Error("an empty memo holds something")
	}
}
