package train

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"dovetail/device/cuda/cudatest"
	"dovetail/dgf/dgftest"
)

// Training on CUDA goes as on the host from the same weights: the losses,
// gradients and resulting weights of a few steps with training-time test
// agree (dgf's TestCUDADraftMatchesHost checks drafting).
func TestCUDATrainingMatchesHost(t *testing.T) {
	const tol = 1e-3
	dev := cudatest.Device(t)
	c := dgftest.TinyConfig
	ref := newDraft32(t, c, 17)
	d, err := ref.Clone(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free()
	rng := rand.New(rand.NewPCG(17, 17))
	cfg := DefaultTrainConfig()
	cfg.Unroll, cfg.LR, cfg.Warmup = 2, 3e-3, 1
	tr, err := NewTrainer(d, cfg, 64, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Free()
	trR, err := NewTrainer(ref, cfg, 64, 16)
	if err != nil {
		t.Fatal(err)
	}
	ws := []Window{dgftest.RandWindow(rng, 16, c.Hidden, c.Vocab, 1), dgftest.RandWindow(rng, 9, c.Hidden, c.Vocab, 1)}
	m, err := tr.Eval(ws)
	if err != nil {
		t.Fatal(err)
	}
	mR, _ := trR.Eval(ws)
	sameMetrics(t, "eval", m, mR, tol)
	for step := range 3 {
		m, err := tr.Step(ws)
		if err != nil {
			t.Fatal(err)
		}
		mR, _ := trR.Step(ws)
		sameMetrics(t, fmt.Sprintf("step %d", step), m, mR, tol)
	}
	for i, pR := range ref.Params {
		p := d.Params[i]
		got, want := make([]float32, p.Size()), make([]float32, p.Size())
		// The last step's gradients, relative to the largest: most are
		// far below the tolerance's floor of 1.
		dev.Download(got, p.G)
		ref.Dev.Download(want, pR.G)
		var big float64
		for _, g := range want {
			big = max(big, math.Abs(float64(g)))
		}
		for j := range want {
			if !(math.Abs(float64(got[j]-want[j])) <= tol*big) {
				t.Errorf("%s gradient[%d] = %g, want %g (largest %g)", p.Name, j, got[j], want[j], big)
				break
			}
		}
		dev.Download(got, p.W)
		ref.Dev.Download(want, pR.W)
		dgftest.CloseTo(t, p.Name, got, want, tol)
	}
}

// sameMetrics compares losses and norms; agreement counts exactly, since
// the argmaxes of tinyConfig's 16 logits have no near tie at these seeds.
func sameMetrics(t *testing.T, what string, got, want Metrics, tol float64) {
	t.Helper()
	for _, v := range []struct {
		name      string
		got, want float64
	}{{"loss", got.Loss, want.Loss}, {"feature loss", got.FeatLoss, want.FeatLoss},
		{"probability loss", got.ProbLoss, want.ProbLoss}, {"gradient norm", got.GradNorm, want.GradNorm},
		{"τ", got.Tau, want.Tau}} {
		if !(math.Abs(v.got-v.want) <= tol*max(1, math.Abs(v.want))) {
			t.Errorf("%s: %s %.9g, want %.9g", what, v.name, v.got, v.want)
		}
	}
	if got.Positions != want.Positions || !slices.Equal(got.Top1, want.Top1) {
		t.Errorf("%s: top-1 %v over %d positions, want %v over %d", what, got.Top1, got.Positions, want.Top1, want.Positions)
	}
}
