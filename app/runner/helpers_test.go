package runner

import (
	"context"
	"runtime"
	"testing"

	"dovetail/app/runner/store"
	"dovetail/engine"
	"dovetail/internal/golden"
)

// open opens a test model (empty: the embedded one) until the test ends.
func open(t testing.TB, name string) *Model {
	t.Helper()
	path := ""
	if name != "" {
		path = golden.ModelPath(name)
	}
	m, err := OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// options are DefaultOptions on at most two threads with a store of the
// test's own, notices kept.
func options(t testing.TB) Options {
	o := DefaultOptions()
	o.Threads = min(2, runtime.NumCPU())
	o.Store = store.At(t.TempDir())
	return o
}

// quickAdapt trains on little and publishes every run: a test sees
// versions come quickly. The trainer runs at normal priority: an idle one
// could wait for as long as other tests keep the cores busy.
func quickAdapt() Adapt {
	a := DefaultAdapt()
	a.Idle = false
	a.Engine.Window, a.Engine.Batch, a.Engine.Steps, a.Engine.HeldOut, a.Engine.MinGain = 8, 4, 2, 2, -1
	a.Engine.Control.MinRecords = 32
	a.SaveEvery = 0
	return a
}

// start is a runner of m with o, closed when the test ends.
func start(t testing.TB, m *Model, o Options) *Runner {
	t.Helper()
	r, err := New(m, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	r.WaitDraft() // a new draft drafts from the first request on
	return r
}

// greedy generates n tokens of prompt greedily on slot 0.
func greedy(t testing.TB, r *Runner, prompt string, n int) ([]int, engine.Stats) {
	t.Helper()
	m := r.Model()
	var out []int
	req := engine.Request{Prompt: m.Tok.Encode(prompt, true, false), MaxTokens: n, Stop: m.Tok.IsEOG}
	st, err := r.Slot(0).Generate(context.Background(), req, func(tok int) error { out = append(out, tok); return nil })
	if err != nil {
		t.Fatal(err)
	}
	return out, st
}

// mustDraft is ParseDraft of a spec a test knows is good.
func mustDraft(t testing.TB, spec string) DraftChoice {
	t.Helper()
	d, err := ParseDraft(spec)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// mustDevice is ParseDevice of a spec a test knows is good.
func mustDevice(t testing.TB, spec string) DeviceChoice {
	t.Helper()
	d, err := ParseDevice(spec)
	if err != nil {
		t.Fatal(err)
	}
	return d
}
