package adapt_test

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"dovetail/cpu"
	"dovetail/device"
	"dovetail/dgf"
	"dovetail/engine"
	"dovetail/engine/adapt"
	"dovetail/engine/drafters"
	"dovetail/engine/enginetest"
	"dovetail/engine/plan"
	"dovetail/engine/tree"
	"dovetail/internal/golden"
	"dovetail/models"
	"dovetail/models/draft"
	"dovetail/train"
)

// versionSpy notes which draft versions drafted within one request.
type versionSpy struct {
	*adapt.Drafter
	seen []int
}

func (v *versionSpy) Draft(ctx []int, p tree.Params) (*tree.Tree, error) {
	t, err := v.Drafter.Draft(ctx, p)
	// The weights that drafted (in per-request mode Version is the kept
	// one, not each round's trial).
	if n, ver := len(v.seen), v.DGF.Version(); n == 0 || v.seen[n-1] != ver {
		v.seen = append(v.seen, ver)
	}
	return t, err
}

// adaptSetup is an untrained draft of m, live, with a learner on a host
// device of its own.
func adaptSetup(t *testing.T, m *models.Llama, cfg adapt.Config, tcfg train.TrainConfig) (*dgf.Live, *train.Learner, *adapt.Adapter) {
	t.Helper()
	d, err := dgf.NewDraft(device.NewHost(1), draft.ForTarget(m.Config, 1, 0), m)
	if err != nil {
		t.Fatal(err)
	}
	d.Init(3)
	live := dgf.NewLive(d, 0)
	l := train.NewLearner(live, device.NewHost(1), tcfg, max(cfg.Batch*cfg.Window, cfg.RequestWindow), max(cfg.Window, cfg.RequestWindow), 3)
	a, err := adapt.NewAdapter(l, m.Config.Hidden, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return live, l, a
}

// fastAdapt trains and publishes as often as it can: every comparison
// wins (MinGain −1), so versions change while requests decode.
func fastAdapt(mode adapt.Mode) adapt.Config {
	cfg := adapt.DefaultConfig()
	cfg.Mode, cfg.Window, cfg.Batch, cfg.Steps, cfg.HeldOut, cfg.MinGain = mode, 8, 4, 1, 2, -1
	cfg.RequestWindow = 16
	cfg.Control.MinRecords, cfg.Control.Patience = 24, 1<<30
	return cfg
}

// Greedy output stays the target's own while the draft's weights are
// swapped between rounds of a request, in both adaptive modes.
func TestAdaptLosslessUnderSwaps(t *testing.T) {
	cases, err := golden.Cases()
	if err != nil {
		t.Fatal(err)
	}
	var prompts [][]int
	var model string
	for _, gc := range cases {
		if gc.Model == cases[0].Model {
			prompts, model = append(prompts, gc.PromptTokens), gc.Model
		}
	}
	m := enginetest.Load(t, filepath.Base(model))
	defer m.Close()
	target := cpu.NewTarget(m, enginetest.Pool, 0)
	tcfg := train.DefaultTrainConfig()
	tcfg.LR, tcfg.Warmup = 3e-3, 0
	for _, mode := range []adapt.Mode{adapt.Background, adapt.PerRequest} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := fastAdapt(mode)
			if mode == adapt.PerRequest {
				tcfg.AnchorWeight = 0.5
			} else {
				// Half of each step's windows end in a rejected node.
				cfg.Branches = 0.5
			}
			live, l, a := adaptSetup(t, m, cfg, tcfg)
			a.Start()
			seq := live.NewSequence(0)
			seq.KeepCache = mode == adapt.PerRequest
			spy := &versionSpy{Drafter: a.Drafter(drafters.NewDGF(seq))}
			midRequest := 0
			for i := 0; i < 40 && (midRequest == 0 || i < 4); i++ {
				prompt := prompts[i%len(prompts)]
				plain, _ := enginetest.Generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 60})
				spy.seen = nil
				got, st := enginetest.Generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 60, Drafter: spy, Tree: tree.Laptop})
				spy.Finish()
				if !slices.Equal(got, plain) {
					t.Fatalf("request %d (draft versions %v): output differs from plain greedy\n got %v\nwant %v", i, spy.seen, got, plain)
				}
				if st.Rounds == 0 {
					t.Fatalf("request %d: no speculative rounds", i)
				}
				if len(spy.seen) > 1 {
					midRequest++
				}
			}
			if err := a.Close(); err != nil {
				t.Fatal(err)
			}
			if midRequest == 0 {
				t.Fatalf("no request saw the draft change under it (stats %+v)", a.Stats())
			}
			st := a.Stats()
			if mode == adapt.Background && (st.Published == 0 || st.Version == 0) {
				t.Errorf("background: nothing published: %+v", st)
			}
			if n := a.Records().Branches(); mode == adapt.Background && n == 0 {
				t.Error("background: no rejected node kept")
			}
			if mode == adapt.PerRequest && l.Version() != 0 {
				t.Errorf("per-request: kept version %d after the requests, want 0: trials are never kept", l.Version())
			}
			t.Logf("%d requests changed draft mid-request; stats %+v", midRequest, st)
			seq.Free()
			l.Free()
			live.Close()
		})
	}
}

// repeatSetup is the first golden case's model (closed at the test's
// end), a target of it, and the case's prompt with the 60 tokens plain
// greedy decoding continues it with.
func repeatSetup(t *testing.T) (m *models.Llama, target engine.Target, prompt, plain []int) {
	t.Helper()
	cases, err := golden.Cases()
	if err != nil {
		t.Fatal(err)
	}
	m = enginetest.Load(t, filepath.Base(cases[0].Model))
	t.Cleanup(func() { m.Close() })
	target = cpu.NewTarget(m, enginetest.Pool, 0)
	prompt = cases[0].PromptTokens
	plain, _ = enginetest.Generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 60})
	return m, target, prompt, plain
}

// The text memory proposes what the target verified before: an untrained
// draft whose weights never change decodes a repeated request in far fewer
// rounds, with the same output, and without the memory in as many.
func TestAdaptMemoryRecalls(t *testing.T) {
	m, target, prompt, plain := repeatSetup(t)
	rounds := map[int][2]int{}
	for _, memory := range []int{0, 1 << 12} {
		cfg := adapt.DefaultConfig()
		cfg.MemoryTokens = memory
		// The trainer is never started: the weights stay as they are.
		live, l, a := adaptSetup(t, m, cfg, train.DefaultTrainConfig())
		seq := live.NewSequence(0)
		d := a.Drafter(drafters.NewDGF(seq))
		var r [2]int
		for i := range r {
			got, st := enginetest.Generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 60, Drafter: d, Tree: tree.Laptop})
			d.Finish()
			if !slices.Equal(got, plain) {
				t.Fatalf("memory %d, request %d: output differs from plain greedy\n got %v\nwant %v", memory, i, got, plain)
			}
			r[i] = st.Rounds
		}
		rounds[memory] = r
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
		seq.Free()
		l.Free()
		live.Close()
	}
	t.Logf("rounds of the first and the repeated request: without memory %v, with %v", rounds[0], rounds[1<<12])
	if r := rounds[0]; r[1] != r[0] {
		t.Errorf("without memory the repeat took %d rounds, the first %d: the weights changed?", r[1], r[0])
	}
	// A LaptopTree holds 7 nodes: 60 tokens in 8 rounds or more.
	if r := rounds[1<<12]; r[1] > 15 {
		t.Errorf("with memory: the repeat took %d rounds, want at most 15", r[1])
	}
}

// While the planner has drafting off (the draft is far too slow), a
// remembered continuation is still verified: a repeated request decodes in
// rounds of several tokens, with the same output.
func TestRecallWhileSpeculationOff(t *testing.T) {
	m, target, prompt, plain := repeatSetup(t)
	// Verifying a few nodes costs about a decode step, as on a large
	// model (this one's would not make recalling pay as reliably).
	prof := plan.Profile{Decode: time.Millisecond, Verify: map[int]time.Duration{}}
	for _, n := range []int{1, 2, 4, 8, 16} {
		prof.Verify[n] = time.Millisecond + time.Duration(n)*10*time.Microsecond
	}
	live, l, a := adaptSetup(t, m, adapt.DefaultConfig(), train.DefaultTrainConfig())
	defer func() { a.Close(); l.Free(); live.Close() }()
	seq := live.NewSequence(0)
	defer seq.Free()
	d := a.Drafter(drafters.NewDGF(seq))
	var st [2]engine.Stats
	for i := range st {
		pl := plan.New(prof, tree.Laptop.TopK)
		pl.ProbeEvery = 1 << 20
		pl.Observe(tree.Laptop, 5, 0, time.Hour) // a draft step takes an hour
		var got []int
		got, st[i] = enginetest.Generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 60, Drafter: d, Tree: tree.Laptop, Planner: pl})
		d.Finish()
		if !slices.Equal(got, plain) {
			t.Fatalf("request %d: output differs from plain greedy\n got %v\nwant %v", i, got, plain)
		}
	}
	t.Logf("first request: %d plain steps, %d recalled rounds; repeat: %d plain steps, %d recalled rounds (τ %.2f)",
		st[0].PlainSteps, st[0].Recalled, st[1].PlainSteps, st[1].Recalled, st[1].Tau())
	// LaptopTree's 7 nodes: 60 tokens in 8 rounds or more.
	if st[1].Rounds != st[1].Recalled || st[1].Rounds+st[1].PlainSteps > 15 {
		t.Errorf("repeat: %d rounds (%d recalled) and %d plain steps: want at most 15 target passes, all recalled rounds",
			st[1].Rounds, st[1].Recalled, st[1].PlainSteps)
	}
}

// A paused adapter keeps recording but trains nothing; resumed, it trains
// again.
func TestAdaptPause(t *testing.T) {
	m := enginetest.Load(t, "stories260K-f32.gguf")
	defer m.Close()
	live, l, a := adaptSetup(t, m, fastAdapt(adapt.Background), train.DefaultTrainConfig())
	defer live.Close()
	defer l.Free()
	target := cpu.NewTarget(m, enginetest.Pool, 0)
	seq := live.NewSequence(0)
	defer seq.Free()
	d := a.Drafter(drafters.NewDGF(seq))
	a.SetPaused(true)
	a.Start()
	decode := func() {
		for range 6 {
			enginetest.Generate(t, target, engine.Request{Prompt: []int{1, 403, 407}, MaxTokens: 40, Drafter: d, Tree: tree.Laptop})
		}
	}
	decode()
	time.Sleep(100 * time.Millisecond)
	if st := a.Stats(); st.Runs != 0 || st.Records == 0 || !st.Paused {
		t.Fatalf("paused: %+v", st)
	}
	a.SetPaused(false)
	deadline := time.Now().Add(20 * time.Second)
	for a.Stats().Runs == 0 && time.Now().Before(deadline) {
		decode()
	}
	if st := a.Stats(); st.Runs == 0 || st.Paused {
		t.Errorf("resumed: %+v", st)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}
