package train

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"

	"dovetail/device"
	"dovetail/dgf"
	"dovetail/dgf/dgftest"
)

// stopTrainer is a trainer of a fresh draft drawn from seed 5, unrolled
// twice (so that a step has steps forward and backward to stop in).
func stopTrainer(t *testing.T) (*dgf.Draft, *Trainer) {
	t.Helper()
	d := newDraft32(t, dgftest.TinyConfig, 5)
	cfg := DefaultTrainConfig()
	cfg.Unroll, cfg.Warmup = 2, 0
	tr, err := NewTrainer(d, cfg, 64, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Free(); d.Free() })
	return d, tr
}

// A step told to stop part way — at any of its checks, forward, loss or
// backward — ends with ErrStopped, leaves the weights and the optimizer
// as they were, and drops its gradients: the next step is exactly the
// step a trainer never stopped takes.
func TestStopDropsStep(t *testing.T) {
	c := dgftest.TinyConfig
	rng := rand.New(rand.NewPCG(5, 5))
	ws := []Window{dgftest.RandWindow(rng, 9, c.Hidden, c.Vocab, 1), dgftest.RandWindow(rng, 6, c.Hidden, c.Vocab, 1)}
	ref, refTr := stopTrainer(t)
	if _, err := refTr.Step(ws); err != nil {
		t.Fatal(err)
	}
	want := weights(ref)
	// How many checks a whole step makes.
	d, tr := stopTrainer(t)
	checks := 0
	tr.StopWhen(func() bool { checks++; return false })
	if _, _, err := tr.run(ws, true); err != nil {
		t.Fatal(err)
	}
	if checks < 2*len(ws) {
		t.Fatalf("a step of %d windows checked %d times", len(ws), checks)
	}
	for at := range checks {
		d, tr = stopTrainer(t)
		before := weights(d)
		n := 0
		tr.StopWhen(func() bool { n++; return n > at })
		if _, err := tr.Step(ws); !errors.Is(err, ErrStopped) {
			t.Fatalf("stopped at check %d of %d: %v, want ErrStopped", at+1, checks, err)
		}
		if !slices.Equal(weights(d), before) || tr.Opt.Step != 0 {
			t.Fatalf("stopped at check %d: the weights or the optimizer (step %d) changed", at+1, tr.Opt.Step)
		}
		if _, err := tr.Eval(ws); !errors.Is(err, ErrStopped) {
			t.Fatalf("scoring after the stop: %v, want ErrStopped", err)
		}
		tr.StopWhen(nil)
		if _, err := tr.Step(ws); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(weights(d), want) {
			t.Fatalf("stopped at check %d, the next step differs from a step never stopped", at+1)
		}
	}
}

// A stopped learner trains and compares no more, and keeps the version it
// last published, not the shadow trained since: what a closing runner
// saves.
func TestLearnerStop(t *testing.T) {
	live := dgf.NewLive(newDraft32(t, dgftest.TinyConfig, 1), 0)
	defer live.Close()
	cfg := DefaultTrainConfig()
	cfg.Warmup, cfg.LR = 0, 1e-2
	l := NewLearner(live, device.NewHost(1), cfg, 32, 8, 3)
	defer l.Free()
	rng := rand.New(rand.NewPCG(3, 3))
	ws := []Window{dgftest.RandWindow(rng, 8, 8, 16, 0.5)}
	for range 3 {
		if _, err := l.Train(ws); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Publish(true); err != nil {
		t.Fatal(err)
	}
	published, err := l.Checkpoint("fp", "target")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		l.Train(ws)
	}
	if slices.Equal(weights(l.shadow), weights(l.base)) {
		t.Fatal("training after the publication left the shadow as published")
	}
	l.Stop()
	if _, err := l.Train(ws); !errors.Is(err, ErrStopped) {
		t.Fatalf("Train after Stop: %v, want ErrStopped", err)
	}
	if _, _, err := l.Compare(ws); !errors.Is(err, ErrStopped) {
		t.Fatalf("Compare after Stop: %v, want ErrStopped", err)
	}
	saved, err := l.Checkpoint("fp", "target")
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range published.Tensors {
		if !slices.Equal(saved.Tensors[name], w) {
			t.Fatalf("%s: the checkpoint after Stop is not the version published", name)
		}
	}
}

// A learner stopped before its first use sets nothing up.
func TestLearnerStopBeforeUse(t *testing.T) {
	live := dgf.NewLive(newDraft32(t, dgftest.TinyConfig, 1), 0)
	defer live.Close()
	l := NewLearner(live, device.NewHost(1), DefaultTrainConfig(), 32, 8, 3)
	defer l.Free()
	l.Stop()
	ws := []Window{dgftest.RandWindow(rand.New(rand.NewPCG(4, 4)), 8, 8, 16, 0.5)}
	if _, err := l.Train(ws); !errors.Is(err, ErrStopped) || l.SetUp() {
		t.Fatalf("Train after Stop: %v, set up %v; want ErrStopped and nothing set up", err, l.SetUp())
	}
}
