package train

import (
	"math"
	"math/rand/v2"
	"testing"

	"dovetail/device"
	"dovetail/dgf"
	"dovetail/dgf/dgftest"
	"dovetail/models/draft"
)

// f32Optimizer is NewOptimizer with float32 moments on any device: what
// the host kept before its moments were bfloat16.
func f32Optimizer(d *dgf.Draft) *Optimizer {
	o := &Optimizer{d: d}
	for _, p := range d.Params {
		o.m = append(o.m, d.Dev.Alloc(p.Size()))
		o.v = append(o.v, d.Dev.Alloc(p.Size()))
	}
	return o
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
		if !half {
			tr.Opt.Free()
			tr.Opt = f32Optimizer(d)
		}
		rng := rand.New(rand.NewPCG(21, 21))
		ws := []Window{dgftest.RandWindow(rng, 32, c.Hidden, c.Vocab, 1), dgftest.RandWindow(rng, 32, c.Hidden, c.Vocab, 1),
			dgftest.RandWindow(rng, 32, c.Hidden, c.Vocab, 1)}
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

// On the host the optimizer's two moments take 2 bytes a value each.
func TestOptimizerBF16OnHost(t *testing.T) {
	d := newDraft32(t, dgftest.TinyConfig, 3)
	before := device.Held(d.Dev)
	o := NewOptimizer(d)
	if got, want := device.Held(d.Dev)-before, 4*uint64(dgftest.TinyConfig.Params()); got != want {
		t.Errorf("the optimizer's moments hold %d bytes, want %d (bfloat16)", got, want)
	}
	o.Free()
}

// The moments go into a checkpoint as float32 and come back the same.
func TestOptimizerSaveLoadBF16(t *testing.T) {
	c := dgftest.TinyConfig
	d := newDraft32(t, c, 3)
	cfg := DefaultTrainConfig()
	tr, err := NewTrainer(d, cfg, 32, 16)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	ws := []Window{dgftest.RandWindow(rng, 16, c.Hidden, c.Vocab, 1)}
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
