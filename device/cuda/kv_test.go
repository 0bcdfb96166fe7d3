package cuda

import (
	"fmt"
	"testing"

	"dovetail/device"
	"dovetail/quant"
)

// A KV cache of halves: stored values are the float32 ones rounded to
// half, views and copies address halves, and attention over it equals the
// host's over the same rounded values (float32 there).
func TestCUDAHalfKV(t *testing.T) {
	p := newPair(t, cudaOrSkip(t), 15)
	for _, a := range []device.Attn{
		{Heads: 32, KVHeads: 32, HeadDim: 128, Past: 300, Pend: 1, Rows: 1},   // decode
		{Heads: 32, KVHeads: 8, HeadDim: 128, Past: 1100, Pend: 16, Rows: 16}, // a verification past a block
		{Heads: 6, KVHeads: 3, HeadDim: 7, Past: 5, Pend: 9, Rows: 3},         // odd sizes
	} {
		a.Mask = p.treeMask(a.Rows, a.Pend)
		name := fmt.Sprintf("%d/%d heads of %d, %d+%d keys, %d rows", a.Heads, a.KVHeads, a.HeadDim, a.Past, a.Pend, a.Rows)
		kvn := a.Keys() * a.KVHeads * a.HeadDim
		kf, vf := p.randf(kvn, 1), p.randf(kvn, 1)
		// On the device: the float values stored into halves at an odd
		// offset of a larger cache; on the host: the rounded values.
		kc, vc := device.AllocKV(p.dev, kvn+3), device.AllocKV(p.dev, kvn+3)
		kh, vh := p.dev.View(kc, 3, kvn), p.dev.View(vc, 3, kvn)
		for _, c := range []struct {
			dst device.Buffer
			src []float32
		}{{kh, kf}, {vh, vf}} {
			tmp := p.dev.Alloc(kvn)
			p.dev.Upload(tmp, c.src)
			device.StoreKV(p.dev, c.dst, tmp)
			p.dev.Free(tmp)
		}
		round := func(v []float32) []float32 {
			out := make([]float32, len(v))
			for i, x := range v {
				out[i] = quant.F16ToF32(quant.F32ToF16(x))
			}
			return out
		}
		kr, vr := round(kf), round(vf)
		got := make([]float32, kvn)
		p.dev.Download(got, kh)
		compare(t, "stored keys "+name, got, kr, 0)
		kref, vref := p.ref.Alloc(kvn), p.ref.Alloc(kvn)
		p.ref.Upload(kref, kr)
		p.ref.Upload(vref, vr)

		qn, pn := a.Rows*a.Heads*a.HeadDim, a.Rows*a.Heads*a.Keys()
		q := p.rand(qn, 1)
		out, probs := p.rand(qn, 1), p.rand(pn, 1)
		p.dev.Attention(out.d, probs.d, q.d, kh, vh, a)
		p.ref.Attention(out.r, probs.r, q.r, kref, vref, a)
		p.check("Attention over halves "+name, out, cudaTolLong)
		p.check("Attention weights over halves "+name, probs, cudaTol)

		// Commit's moves: a copy between views of halves.
		row := a.KVHeads * a.HeadDim
		p.dev.Copy(p.dev.View(kc, 3, row), p.dev.View(kc, 3+row*(a.Keys()-1), row))
		first := make([]float32, row)
		p.dev.Download(first, p.dev.View(kc, 3, row))
		compare(t, "a copied row of halves "+name, first, kr[(a.Keys()-1)*row:], 0)
		p.dev.Free(kc)
		p.dev.Free(vc)
	}
}

// StoreKVPair rounds keys and values into caches of halves at an offset,
// as StoreKV does each, and copies them into float32 caches.
func TestCUDAStoreKVPair(t *testing.T) {
	dev := cudaOrSkip(t)
	const n, off = 37, 5
	kf, vf := make([]float32, n), make([]float32, n)
	for i := range kf {
		kf[i], vf[i] = float32(i)/3, -float32(i)/7
	}
	k, v := dev.Alloc(n), dev.Alloc(n)
	defer dev.Free(k)
	defer dev.Free(v)
	dev.Upload(k, kf)
	dev.Upload(v, vf)
	round := func(x []float32) []float32 {
		out := make([]float32, len(x))
		for i, f := range x {
			out[i] = quant.F16ToF32(quant.F32ToF16(f))
		}
		return out
	}
	for _, c := range []struct {
		what  string
		alloc func(int) device.Buffer
		want  func([]float32) []float32
	}{
		{"halves", func(m int) device.Buffer { return device.AllocKV(dev, m) }, round},
		{"float32", dev.Alloc, func(x []float32) []float32 { return x }},
	} {
		kc, vc := c.alloc(n+off), c.alloc(n+off)
		device.StoreKVPair(dev, dev.View(kc, off, n), k, dev.View(vc, off, n), v)
		got := make([]float32, n)
		dev.Download(got, dev.View(kc, off, n))
		compare(t, "keys into "+c.what, got, c.want(kf), 0)
		dev.Download(got, dev.View(vc, off, n))
		compare(t, "values into "+c.what, got, c.want(vf), 0)
		dev.Free(kc)
		dev.Free(vc)
	}
}
