package runner

import (
	"context"
	"math/rand/v2"
	"slices"

	"dovetail/device"
	"dovetail/dgf"
	"dovetail/engine"
	"dovetail/engine/drafters"
	"dovetail/engine/plan"
	"dovetail/engine/tree"
	"dovetail/models/draft"
)

// draftedSpeed is generation's speed with a new, untrained draft of shape
// cfg on dev beside t, the planner choosing each round from profile as a
// run's does: the slowest the draft makes decoding, before it learned
// anything (the planner's first rounds and probes, the draft reading every
// token). The median, slowest and fastest of plainRuns generations of up
// to n tokens, sampled as plainSpeed's.
func draftedSpeed(m *Model, cfg draft.Config, dev device.Device, t engine.Target, profile plan.Profile, prompt, n int) (median, low, high float64, err error) {
	d, err := dgf.NewDraft(dev, cfg, m.Llama)
	if err != nil {
		return 0, 0, 0, err
	}
	defer d.Free()
	if err := d.DayZeroForDraftingUnless(1, nil); err != nil {
		return 0, 0, 0, err
	}
	seq := d.NewSequence(t.Context())
	defer seq.Free()
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
		req := engine.Request{Prompt: toks, MaxTokens: n, Sampler: sampler, Drafter: drafters.NewDGF(seq), Tree: tree.Server,
			Planner: plan.New(profile, tree.Server.TopK)}
		st, err := engine.Generate(context.Background(), t, req, func(int) error { return nil })
		if err != nil {
			return 0, 0, 0, err
		}
		speeds = append(speeds, st.GenTokensPerSec())
	}
	slices.Sort(speeds)
	return speeds[len(speeds)/2], speeds[0], speeds[len(speeds)-1], nil
}
