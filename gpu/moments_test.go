package gpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"dovetail/models/draft"
	"dovetail/quant"
)

// f32Optimizer is NewOptimizer with float32 moments on any device: what
// the host kept before its moments were bfloat16.
func f32Optimizer(d *Draft) *Optimizer {
	o := &Optimizer{d: d}
	for _, p := range d.Params {
		o.m = append(o.m, d.Dev.Alloc(p.Size()))
		o.v = append(o.v, d.Dev.Alloc(p.Size()))
	}
	return o
}

// One update with bfloat16 moments is the float32 update from the same
// moments, the new moments rounded: the parameters come out the same bits.
func TestAdamWMomentsBF16(t *testing.T) {
	h := newHost[float32](2)
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

// A draft trains as far with bfloat16 moments as with float32 ones.
func TestTrainingBF16Moments(t *testing.T) {
	c := draft.Config{Hidden: 32, Blocks: 1, Heads: 4, KVHeads: 2, HeadDim: 8, FFN: 64, Vocab: 48,
		Context: 64, RopeTheta: 10000, RMSEps: 1e-5}
	losses := map[bool]float64{}
	var first float64
	for _, half := range []bool{false, true} {
		d := newDraft32(t, c, 21)
		cfg := DefaultTrainConfig()
		cfg.LR, cfg.Warmup = 3e-3, 5
		tr, err := NewTrainer(d, cfg, 96, 32)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := bf16(tr.Opt.m[0]); !ok {
			t.Fatalf("the host's trainer keeps %T moments", tr.Opt.m[0])
		}
		if !half {
			tr.Opt.Free()
			tr.Opt = f32Optimizer(d)
		}
		rng := rand.New(rand.NewPCG(21, 21))
		ws := []Window{randWindow(rng, 32, c.Hidden, c.Vocab, 1), randWindow(rng, 32, c.Hidden, c.Vocab, 1),
			randWindow(rng, 32, c.Hidden, c.Vocab, 1)}
		m0, _ := tr.Eval(ws)
		first = m0.Loss
		for range 150 {
			if _, err := tr.Step(ws); err != nil {
				t.Fatal(err)
			}
		}
		last, _ := tr.Eval(ws)
		losses[half] = last.Loss
	}
	t.Logf("loss %.4f → %.4f with float32 moments, %.4f with bfloat16", first, losses[false], losses[true])
	if !(losses[false] < 0.5*first) || math.Abs(losses[true]-losses[false]) > 0.03*losses[false] {
		t.Errorf("loss %.4f → %.4f with float32 moments, %.4f with bfloat16", first, losses[false], losses[true])
	}
}

// The moments go into a checkpoint as float32 and come back the same.
func TestOptimizerSaveLoadBF16(t *testing.T) {
	c := tinyConfig
	d := newDraft32(t, c, 3)
	cfg := DefaultTrainConfig()
	tr, err := NewTrainer(d, cfg, 32, 16)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	ws := []Window{randWindow(rng, 16, c.Hidden, c.Vocab, 1)}
	for range 3 {
		if _, err := tr.Step(ws); err != nil {
			t.Fatal(err)
		}
	}
	ck := &draft.Checkpoint{Tensors: map[string][]float32{}, Meta: map[string]string{}}
	tr.Opt.Save(ck)
	o := NewOptimizer(d)
	if err := o.Load(ck); err != nil {
		t.Fatal(err)
	}
	for i, p := range d.Params {
		a, b := make([]float32, p.Size()), make([]float32, p.Size())
		d.Dev.Download(a, tr.Opt.v[i])
		d.Dev.Download(b, o.v[i])
		for k := range a {
			if a[k] != b[k] || a[k] != ck.Tensors[draft.PrefixAdamV+p.Name][k] {
				t.Fatalf("%s: second moment %d %g saved, %g loaded", p.Name, k, a[k], b[k])
			}
		}
	}
	if o.Step != 3 {
		t.Errorf("step %d loaded, 3 saved", o.Step)
	}
}
