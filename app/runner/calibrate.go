package runner

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"dovetail/app/runner/store"
	"dovetail/cpu"
	"dovetail/device"
	"dovetail/device/cuda"
	"dovetail/dgf"
	"dovetail/engine"
	"dovetail/engine/drafters"
	"dovetail/engine/tree"
	"dovetail/models/draft"
)

// Step is where a calibration stands, for a progress bar.
type Step struct {
	What        string
	Done, Total int
}

// Calibrate measures what predictions of m need on threads threads: the
// target's T_T and T_V(n) (profileSizes, the median of five), and a step
// of its DGF draft on the CPU and, when gpus is set and one answers, on
// the first GPU. The result is kept in st for the planner and setup.
func Calibrate(m *Model, st *store.Store, threads int, gpus bool, progress func(Step)) (Calibration, error) {
	if progress == nil {
		progress = func(Step) {}
	}
	total := 2
	if gpus {
		total = 3
	}
	c := Calibration{Threads: threads, DraftStep: map[string]time.Duration{}, At: time.Now().UTC()}
	pool := cpu.NewPool(threads)
	defer pool.Close()
	progress(Step{"the target's decode and verification costs", 0, total})
	target := cpu.NewTarget(m.Llama, pool, 0)
	prompt := min(32, target.Context()/4)
	var sizes []int
	for _, n := range profileSizes {
		if prompt+n <= target.Context() {
			sizes = append(sizes, n)
		}
	}
	var err error
	if c.Profile, err = engine.ProfileTargetWithin(target, prompt, min(32, target.Context()-prompt), sizes, 5, profileBudget); err != nil {
		return c, fmt.Errorf("calibrating %s: %w", m.Name, err)
	}
	if c.Plain, c.PlainLow, c.PlainHigh, err = plainSpeed(target, prompt, plainTokens(c.Profile.Decode)); err != nil {
		return c, fmt.Errorf("calibrating %s: %w", m.Name, err)
	}
	cfg := autoDraftOf(m, st).cfg
	progress(Step{"a draft step on the CPU", 1, total})
	if c.DraftStep["cpu"], err = timeDraftStep(m, cfg, device.NewHost(threads)); err != nil {
		return c, fmt.Errorf("calibrating %s's draft: %w", m.Name, err)
	}
	if c.Drafted, c.DraftedLow, c.DraftedHigh, err = draftedSpeed(m, cfg, device.NewHost(threads), target, c.Profile, prompt, plainTokens(c.Profile.Decode)); err != nil {
		return c, fmt.Errorf("calibrating %s's draft: %w", m.Name, err)
	}
	if gpus {
		progress(Step{"a draft step on the GPU", 2, total})
		if dev, err := cuda.Open(0); err == nil {
			c.DraftStep["cuda:0"], err = timeDraftStep(m, cfg, dev)
			dev.Close()
			if err != nil {
				return c, fmt.Errorf("calibrating %s's draft on the GPU: %w", m.Name, err)
			}
		} else if !errors.Is(err, cuda.ErrNoDevice) {
			return c, fmt.Errorf("calibrating on the GPU: %w", err)
		}
	}
	progress(Step{"done", total, total})
	if st != nil {
		if err := saveCalibration(st, m, c); err != nil {
			return c, fmt.Errorf("keeping the calibration: %w", err)
		}
	}
	return c, nil
}

// plainSpeed is generation's speed through the engine, as run and the
// chat decode without a draft (calibrationSampler): the median of
// plainRuns generations of up to n tokens after prompt random tokens, and
// the slowest and fastest of them, the spread setup's prediction carries.
func plainSpeed(t engine.Target, prompt, n int) (median, low, high float64, err error) {
	return generationSpeeds(t, prompt, n, func(*engine.Request) {})
}

// generationSpeeds times plainRuns generations of up to n tokens after
// prompt random tokens, sampled as the chat samples (each run its own
// seed), each request as with makes it: their median, slowest and
// fastest speeds.
func generationSpeeds(t engine.Target, prompt, n int, with func(*engine.Request)) (median, low, high float64, err error) {
	rng := rand.New(rand.NewPCG(3, 4))
	toks := make([]int, prompt)
	for i := range toks {
		toks[i] = rng.IntN(t.Vocab())
	}
	n = min(n, t.Context()-prompt-1)
	var speeds []float64
	for i := range plainRuns {
		sampler := calibrationSampler
		sampler.Seed = uint64(i + 1)
		req := engine.Request{Prompt: toks, MaxTokens: n, Sampler: sampler}
		with(&req)
		st, err := engine.Generate(context.Background(), t, req, func(int) error { return nil })
		if err != nil {
			return 0, 0, 0, err
		}
		speeds = append(speeds, st.GenTokensPerSec())
	}
	slices.Sort(speeds)
	return speeds[len(speeds)/2], speeds[0], speeds[len(speeds)-1], nil
}

// plainRuns is how many generations plainSpeed times.
const plainRuns = 5

// calibrationSampler is the sampling run and the chat do by default: on
// a small model choosing among 32,000 logits costs as much as the
// forward pass, and a greedy calibration predicted twice the speed the
// chat then measured.
var calibrationSampler = engine.SamplerParams{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1}

// plainTokens is how many tokens each of plainSpeed's generations takes
// for a target whose decode step takes tt: 64, or as many as plainBudget
// holds (at least 8). Beside the engine's work a step of a large model
// is all T_T, which the profile has just measured: on a 7B target 64
// tokens, three times, took as long as the rest of a calibration
// (docs/measurements/memory-and-startup.md, "Calibration of a 7B target").
func plainTokens(tt time.Duration) int {
	if tt <= 0 {
		return 64
	}
	return max(8, min(64, int(plainBudget/tt)))
}

// plainBudget is about how long each of plainSpeed's generations runs.
const plainBudget = time.Second

// profileBudget is about how long the profile's rounds run before it
// settles for three (engine.ProfileTargetWithin): five rounds of a 7B
// target took 19 s of a calibration.
const profileBudget = 5 * time.Second

// profileSizes are the tree sizes whose verification cost is calibrated.
var profileSizes = []int{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}

// calibrationTree is the tree a draft step is timed in.
var calibrationTree = tree.Params{TopK: 10, Depth: 4, Tokens: 16}

// timeDraftStep times a step of an untrained draft of shape cfg on dev:
// the median of five trees of calibrationTree after 32 positions, per
// level, as the planner counts draft time. The weights do not matter to
// the time; the device frees what it allocated.
func timeDraftStep(m *Model, cfg draft.Config, dev device.Device) (time.Duration, error) {
	d, err := dgf.NewDraft(dev, cfg, m.Llama)
	if err != nil {
		return 0, err
	}
	defer d.Free()
	if err := d.DayZeroForDraftingUnless(1, nil); err != nil {
		return 0, err
	}
	seq := d.NewSequence(256)
	defer seq.Free()
	dd := drafters.NewDGF(seq)
	rng := rand.New(rand.NewPCG(1, 2))
	const n = 32
	ctx := make([]int, n+1)
	feats := make([][]float32, n)
	for i := range ctx {
		ctx[i] = rng.IntN(cfg.Vocab)
	}
	for i := range feats {
		feats[i] = make([]float32, cfg.FeatureIn()) // an EAGLE-3 draft reads three layers
		for j := range feats[i] {
			feats[i][j] = float32(rng.NormFloat64())
		}
	}
	dd.Prefilled(ctx[:n], feats)
	dd.Accepted(ctx[n:], feats[:1]) // the root's feature
	var ts []time.Duration
	for range 6 {
		t0 := time.Now()
		if _, err := dd.Draft(ctx, calibrationTree); err != nil {
			return 0, err
		}
		ts = append(ts, time.Since(t0))
	}
	ts = ts[1:] // the first pays for warming up
	slices.Sort(ts)
	return ts[len(ts)/2] / time.Duration(calibrationTree.Depth+1), nil
}
