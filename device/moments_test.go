package device

import (
	"math/rand/v2"
	"testing"

	"dovetail/quant"
)

// One update with bfloat16 moments is the float32 update from the same
// moments, the new moments rounded: the parameters come out the same bits.
func TestAdamWMomentsBF16(t *testing.T) {
	h := newHost[float32](HostConfig{Threads: 2})
	rng := rand.New(rand.NewPCG(5, 5))
	const n = 1001
	w, g, m, v := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range n {
		w[i], g[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64()*1e-3)
		m[i] = quant.BF16ToF32(quant.F32ToBF16(float32(rng.NormFloat64() * 1e-3)))
		v[i] = quant.BF16ToF32(quant.F32ToBF16(float32(rng.Float64() * 1e-6)))
	}
	hp := AdamW{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.01, Step: 7, GradScale: 0.8}
	run := func(mb, vb Buffer) (wo, mo, vo []float32) {
		pw, pg := h.Alloc(n), h.Alloc(n)
		h.Upload(pw, w)
		h.Upload(pg, g)
		h.Upload(mb, m)
		h.Upload(vb, v)
		h.AdamWUpdate(pw, pg, mb, vb, hp, true)
		wo, mo, vo = make([]float32, n), make([]float32, n), make([]float32, n)
		h.Download(wo, pw)
		h.Download(mo, mb)
		h.Download(vo, vb)
		h.Free(pw)
		h.Free(pg)
		return wo, mo, vo
	}
	w32, m32, v32 := run(h.Alloc(n), h.Alloc(n))
	before := h.Held()
	mb, vb := h.AllocMoment(n), h.AllocMoment(n)
	if got := h.Held() - before; got != 4*n {
		t.Errorf("two bfloat16 moments of %d values hold %d bytes", n, got)
	}
	w16, m16, v16 := run(mb, vb)
	for i := range n {
		if w16[i] != w32[i] {
			t.Fatalf("parameter %d: %g with bfloat16 moments, %g with float32", i, w16[i], w32[i])
		}
		if m16[i] != quant.BF16ToF32(quant.F32ToBF16(m32[i])) || v16[i] != quant.BF16ToF32(quant.F32ToBF16(v32[i])) {
			t.Fatalf("moments %d: %g, %g; float32's %g, %g", i, m16[i], v16[i], m32[i], v32[i])
		}
	}
	if m16[0] == m32[0] && m16[1] == m32[1] && m16[2] == m32[2] {
		t.Errorf("the moments were not rounded: %v", m16[:3])
	}
	h.Free(mb)
	h.Free(vb)
	if h.Held() != before {
		t.Errorf("held %d bytes after freeing the moments, %d before", h.Held(), before)
	}
}
