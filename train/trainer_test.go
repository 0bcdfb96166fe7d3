package train

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"dovetail/device"
	"dovetail/dgf"
	"dovetail/dgf/dgftest"
	"dovetail/models/draft"
)

// newDraft32 is a random float32 draft on the host device.
func newDraft32(t testing.TB, c draft.Config, seed uint64) *dgf.Draft {
	t.Helper()
	d, err := dgf.NewDraft(device.NewHost(2), c, dgftest.Target(seed, c))
	if err != nil {
		t.Fatal(err)
	}
	d.Init(seed)
	return d
}

// weights is every parameter's values, in order.
func weights(d *dgf.Draft) []float32 {
	var out []float32
	for _, p := range d.Params {
		out = append(out, d.Values(nil, p)...)
	}
	return out
}

// fdEps is the step of the finite differences.
const fdEps = 1e-6

// The whole draft's gradient (DGF, blocks, both losses, and training-time
// test through the draft's own predictions) against finite differences of
// its loss, in float64.
func TestGradDraft(t *testing.T) {
	eagle := dgftest.TinyConfig
	eagle.Kind, eagle.FCBias = draft.EAGLE1, true // EAGLE-1 trains as the DGF does: fc, its bias, the layers
	for _, tc := range []struct {
		unroll int
		anchor float32
		c      draft.Config
	}{{1, 0, dgftest.TinyConfig}, {3, 0, dgftest.TinyConfig}, {2, 0.7, dgftest.TinyConfig}, {1, 0, eagle}, {3, 0, eagle}} {
		unroll := tc.unroll
		rng := rand.New(rand.NewPCG(11, uint64(unroll)))
		h := device.NewHost64(device.HostConfig{Threads: 2})
		d, err := dgf.NewDraft(h, tc.c, dgftest.FakeTarget(rng, tc.c.Hidden, tc.c.Vocab))
		if err != nil {
			t.Fatal(err)
		}
		d.Init(3)
		// Norm weights away from 1, so that their gradients are generic.
		for _, p := range d.Params {
			if p.Rows == 1 {
				for i := range device.Values64(p.W) {
					device.Values64(p.W)[i] = 1 + 0.3*(2*rng.Float64()-1)
				}
			}
		}
		cfg := DefaultTrainConfig()
		cfg.Unroll, cfg.ProbWeight, cfg.AnchorWeight = unroll, 0.5, tc.anchor
		tr, err := NewTrainer(d, cfg, 16, 8)
		if err != nil {
			t.Fatal(err)
		}
		if tc.anchor > 0 {
			// The per-request term, toward another draft's distribution.
			a, err := d.Clone(h)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range a.Params {
				for i := range device.Values64(p.W) {
					device.Values64(p.W)[i] += 0.2 * (2*rng.Float64() - 1)
				}
			}
			if err := tr.SetAnchor(a); err != nil {
				t.Fatal(err)
			}
		}
		ws := []Window{dgftest.RandWindow(rng, 5, 8, 16, 0.5), dgftest.RandWindow(rng, 3, 8, 16, 0.5)}
		if _, _, err := tr.run(ws, true); err != nil {
			t.Fatal(err)
		}
		loss := func() float64 {
			m, _, err := tr.run(ws, false)
			if err != nil {
				t.Fatal(err)
			}
			return m.Loss
		}
		for _, p := range d.Params {
			x, g := device.Values64(p.W), append([]float64(nil), device.Values64(p.G)...)
			worst := 0.0
			for j := range x {
				num := dgftest.CentralDiff(x, j, fdEps, loss)
				e := math.Abs(num-g[j]) / max(1e-3, math.Abs(num), math.Abs(g[j]))
				worst = max(worst, e)
				if e > 1e-5 {
					t.Fatalf("unroll %d, anchor %g: %s[%d]: backward %.9g, finite differences %.9g", unroll, tc.anchor, p.Name, j, g[j], num)
				}
			}
			t.Logf("unroll %d, anchor %g: %s: %d values, worst relative error %.2g", unroll, tc.anchor, p.Name, len(x), worst)
		}
	}
}

// Training's forward (windows side by side, causal, and unroll steps with
// the training-time-test mask) computes what drafting computes: position by
// position for step 0, and the tree child along the diagonal for step 1.
func TestTrainingForwardMatchesDrafting(t *testing.T) {
	c := dgftest.TinyConfig
	d := newDraft32(t, c, 9)
	rng := rand.New(rand.NewPCG(9, 9))
	cfg := DefaultTrainConfig()
	cfg.Unroll = 2
	tr, err := NewTrainer(d, cfg, 32, 16)
	if err != nil {
		t.Fatal(err)
	}
	ws := []Window{dgftest.RandWindow(rng, 7, c.Hidden, c.Vocab, 1), dgftest.RandWindow(rng, 9, c.Hidden, c.Vocab, 1)}
	if _, _, err := tr.run(ws, false); err != nil {
		t.Fatal(err)
	}
	row := 0
	H := c.Hidden
	for _, w := range ws {
		T := len(w.Tokens) - 1
		out0, out1 := make([]float32, T*H), make([]float32, T*H)
		d.Dev.Download(out0, d.Dev.View(tr.steps[0].Out(), row*H, T*H))
		d.Dev.Download(out1, d.Dev.View(tr.steps[1].Out(), row*H, T*H))
		s := d.NewSequence(0)
		for p := range T {
			_, pred, err := s.Forward(w.Features[p:p+1], w.Tokens[p+1:p+2])
			if err != nil {
				t.Fatal(err)
			}
			dgftest.CloseTo(t, "step 0 feature", pred, out0[p*H:(p+1)*H], 1e-5)
			if p+2 > T {
				continue
			}
			_, child, err := s.Extend([][]float32{append([]float32(nil), pred...)}, w.Tokens[p+2:p+3], []int{-1})
			if err != nil {
				t.Fatal(err)
			}
			dgftest.CloseTo(t, "step 1 feature", child[0], out1[p*H:(p+1)*H], 1e-5)
		}
		row += T
	}
}

// Training on a fixed batch lowers the loss: the gradients point
// downhill and the optimizer follows them.
func TestTrainingReducesLoss(t *testing.T) {
	c := dgftest.TinyConfig
	d := newDraft32(t, c, 13)
	rng := rand.New(rand.NewPCG(13, 13))
	cfg := DefaultTrainConfig()
	cfg.LR, cfg.Warmup = 3e-3, 1
	tr, err := NewTrainer(d, cfg, 64, 16)
	if err != nil {
		t.Fatal(err)
	}
	ws := []Window{dgftest.RandWindow(rng, 16, c.Hidden, c.Vocab, 1), dgftest.RandWindow(rng, 16, c.Hidden, c.Vocab, 1)}
	first, err := tr.Eval(ws)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if _, err := tr.Step(ws); err != nil {
			t.Fatal(err)
		}
	}
	last, _ := tr.Eval(ws)
	if !(last.Loss < 0.7*first.Loss) {
		t.Errorf("loss %.4f after 100 steps, %.4f before", last.Loss, first.Loss)
	}
	t.Logf("loss %.4f → %.4f, top-1 %.2f → %.2f", first.Loss, last.Loss, first.Top1[0], last.Top1[0])
}

// Training moves a day-0 draft's zero matrices (each block's attn_output
// and ffn_down) off zero.
func TestDayZeroTrains(t *testing.T) {
	c := dgftest.TinyConfig
	rng := rand.New(rand.NewPCG(21, 0))
	d, err := dgf.NewDraft(device.NewHost(2), c, dgftest.Target(21, c))
	if err != nil {
		t.Fatal(err)
	}
	d.InitDayZero(5)
	isZero := func(v []float32) bool { return !slices.ContainsFunc(v, func(x float32) bool { return x != 0 }) }
	tr, err := NewTrainer(d, DefaultTrainConfig(), 64, 16)
	if err != nil {
		t.Fatal(err)
	}
	ws := []Window{dgftest.RandWindow(rng, 16, c.Hidden, c.Vocab, 1)}
	for range 3 {
		if _, err := tr.Step(ws); err != nil {
			t.Fatal(err)
		}
	}
	ends := 0
	for _, p := range d.Params {
		if strings.HasSuffix(p.Name, "attn_output.weight") || strings.HasSuffix(p.Name, "ffn_down.weight") {
			ends++
			if isZero(d.Values(nil, p)) {
				t.Errorf("%s still zero after training", p.Name)
			}
		}
	}
	if ends != 2*c.Blocks {
		t.Fatalf("%d residual branch ends, want %d", ends, 2*c.Blocks)
	}
}

// Training reads W: one step of a draft frozen for drafting gives the
// loss of the same weights unfrozen (dgf's TestFreezeForDrafting checks
// that drafting reads the Q8_0 copies).
func TestFrozenDraftTrainsOnFloat(t *testing.T) {
	c := draft.Config{Hidden: 64, Blocks: 1, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 96, Vocab: 40,
		Context: 64, RopeTheta: 10000, RMSEps: 1e-5}
	large := device.HostConfig{Threads: 2, Float32Upto: c.Hidden * c.Hidden}
	d, err := dgf.NewDraft(device.NewHostWith(large), c, dgftest.Target(4, c))
	if err != nil {
		t.Fatal(err)
	}
	d.Init(4)
	ref := newDraft32(t, c, 4)
	if err := d.FreezeForDrafting(); err != nil {
		t.Fatal(err)
	}
	w := dgftest.RandWindow(rand.New(rand.NewPCG(4, 4)), 6, c.Hidden, c.Vocab, 1)
	// Training reads W: one step from the same weights gives the same loss.
	var loss [2]float64
	for i, dr := range []*dgf.Draft{d, ref} {
		tr, err := NewTrainer(dr, DefaultTrainConfig(), 64, 16)
		if err != nil {
			t.Fatal(err)
		}
		m, err := tr.Step([]Window{w})
		if err != nil {
			t.Fatal(err)
		}
		loss[i] = m.Loss
	}
	if loss[0] != loss[1] {
		t.Errorf("training loss %v on the frozen draft, %v on the float32 one", loss[0], loss[1])
	}
}

// TargetSharpness sharpens only the cross-entropy's target: 1 changes
// nothing, 3 changes the soft cross-entropy but neither the features'
// SmoothL1 nor the top-1 agreement (the target's argmax stays).
func TestTargetSharpness(t *testing.T) {
	c := dgftest.TinyConfig
	d := newDraft32(t, c, 21)
	rng := rand.New(rand.NewPCG(21, 21))
	ws := []Window{dgftest.RandWindow(rng, 16, c.Hidden, c.Vocab, 1), dgftest.RandWindow(rng, 12, c.Hidden, c.Vocab, 1)}
	eval := func(s float32) Metrics {
		cfg := DefaultTrainConfig()
		cfg.TargetSharpness = s
		tr, err := NewTrainer(d, cfg, 64, 16)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Free()
		m, err := tr.Eval(ws)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	off, one, sharp := eval(0), eval(1), eval(3)
	if one.ProbLoss != off.ProbLoss || one.FeatLoss != off.FeatLoss {
		t.Errorf("sharpness 1: losses %v %v, want %v %v", one.ProbLoss, one.FeatLoss, off.ProbLoss, off.FeatLoss)
	}
	if sharp.FeatLoss != off.FeatLoss || sharp.Top1[0] != off.Top1[0] {
		t.Errorf("sharpness 3: SmoothL1 %v, top-1 %v; want %v, %v", sharp.FeatLoss, sharp.Top1[0], off.FeatLoss, off.Top1[0])
	}
	if math.Abs(sharp.ProbLoss-off.ProbLoss) < 1e-3*off.ProbLoss {
		t.Errorf("sharpness 3: cross-entropy %v, the same as unsharpened", sharp.ProbLoss)
	}
}

// A scorer scores as a trainer of its unroll does, from the buffers it
// borrows, without gradients or optimizer state of its own; it does not
// train.
func TestScorer(t *testing.T) {
	c := dgftest.TinyConfig
	d := newDraft32(t, c, 31)
	rng := rand.New(rand.NewPCG(31, 31))
	ws := []Window{dgftest.RandWindow(rng, 8, c.Hidden, c.Vocab, 1), dgftest.RandWindow(rng, 5, c.Hidden, c.Vocab, 1)}
	cfg := DefaultTrainConfig()
	tr, err := NewTrainer(d, cfg, 32, 16)
	if err != nil {
		t.Fatal(err)
	}
	dev := d.Dev
	held := device.Held(dev)
	sc, err := NewScorer(tr, 3)
	if err != nil {
		t.Fatal(err)
	}
	scorerBytes := device.Held(dev) - held
	cfg.Unroll = 3
	ref, err := NewTrainer(d, cfg, 32, 16)
	if err != nil {
		t.Fatal(err)
	}
	refBytes := device.Held(dev) - held - scorerBytes
	// Its own: per block the attention weights of its deepest step (32
	// rows × 2 heads × 3 steps of 16 keys), and every step's keys and
	// values (3 × 32 rows × 4); the activations are the trainer's.
	if own := uint64(4 * c.Blocks * (32*2*3*16 + 2*3*32*4)); scorerBytes != own {
		t.Errorf("the scorer holds %d bytes, by hand %d, a trainer of its unroll %d", scorerBytes, own, refBytes)
	}
	for range 2 { // the second time after the trainer used the shared buffers
		got, err := sc.Eval(ws)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ref.Eval(ws)
		if got.Loss != want.Loss || got.Tau != want.Tau || !slices.Equal(got.Top1, want.Top1) {
			t.Fatalf("scorer %+v, trainer %+v", got, want)
		}
		if _, err := tr.Step(ws); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sc.Step(ws); err == nil || !strings.Contains(err.Error(), "scorer") {
		t.Errorf("a scorer's Step: %v", err)
	}
	ref.Free()
	sc.Free()
	if got := device.Held(dev); got != held {
		t.Errorf("freeing the scorer left %d bytes held, %d before it", got, held)
	}
	tr.Free()
}
