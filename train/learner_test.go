package train

import (
	"math/rand/v2"
	"slices"
	"testing"

	"dovetail/device"
	"dovetail/dgf"
	"dovetail/dgf/dgftest"
)

// The learner trains its shadow without touching the live draft, compares
// it with the kept version, and Restore undoes a trial publication.
func TestLearner(t *testing.T) {
	live := dgf.NewLive(newDraft32(t, dgftest.TinyConfig, 1), 0)
	defer live.Close()
	// The live draft's newest weights, as a snapshot copies them.
	newest := func() []float32 {
		d, _, err := live.Snapshot(device.NewHost(1))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Free()
		return weights(d)
	}
	start := newest()
	cfg := DefaultTrainConfig()
	cfg.Warmup, cfg.LR = 0, 1e-2
	l := NewLearner(live, device.NewHost(1), cfg, 32, 8, 3)
	defer l.Free()
	rng := rand.New(rand.NewPCG(2, 2))
	ws := []Window{dgftest.RandWindow(rng, 8, 8, 16, 0.5), dgftest.RandWindow(rng, 8, 8, 16, 0.5)}
	sh, kept, err := l.Compare(ws)
	if err != nil || sh != kept {
		t.Fatalf("before training, shadow %+v and kept %+v differ (%v)", sh, kept, err)
	}
	first, _ := l.Train(ws)
	var last float64
	for range 30 {
		s, err := l.Train(ws)
		if err != nil {
			t.Fatal(err)
		}
		last = s.Loss
	}
	if last >= first.Loss {
		t.Fatalf("training loss %g → %g", first.Loss, last)
	}
	if !slices.Equal(newest(), start) {
		t.Fatal("training changed the live draft")
	}
	sh, kept, _ = l.Compare(ws)
	if sh.Loss >= kept.Loss || sh.Tau < 1 || sh.Tau > 4 {
		t.Fatalf("after training on the windows: shadow %+v, kept %+v", sh, kept)
	}
	if v, err := l.Publish(false); err != nil || v != 1 || l.Version() != 0 {
		t.Fatalf("trial publication: version %d (kept %d), %v", v, l.Version(), err)
	}
	if err := l.Restore(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(newest(), start) || !slices.Equal(weights(l.shadow), start) {
		t.Fatal("Restore did not bring back the kept weights")
	}
	for range 5 {
		l.Train(ws)
	}
	if v, err := l.Publish(true); err != nil || v != l.Version() || !slices.Equal(newest(), weights(l.shadow)) {
		t.Fatalf("kept publication: version %d (kept %d), %v", v, l.Version(), err)
	}
}

// The simulated chain τ counts each position's leading agreeing steps,
// over the positions every step reaches.
func TestChainTau(t *testing.T) {
	b := &batch{lens: []int{4, 3}, off: []int{0, 4}}
	agree := [][]float32{
		{1, 1, 0, 1, 1, 1, 1},
		{1, 0, 1, 9, 1, 0, 9},
		{0, 1, 1, 9, 1, 9, 9},
	}
	// Window 0, positions 0 and 1: runs 2 and 1; window 1, position 0: 3.
	if got, want := chainTau(agree, b), 1+6.0/3; got != want {
		t.Fatalf("τ %g, want %g", got, want)
	}
}
