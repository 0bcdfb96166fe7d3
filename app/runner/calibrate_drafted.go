package runner

import (
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
	return generationSpeeds(t, prompt, n, func(req *engine.Request) {
		req.Drafter, req.Tree, req.Planner = drafters.NewDGF(seq), tree.Server, plan.New(profile, tree.Server.TopK)
	})
}
