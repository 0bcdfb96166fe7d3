package engine_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"dovetail/cpu"
	"dovetail/engine"
	"dovetail/engine/drafters"
	"dovetail/engine/enginetest"
	"dovetail/engine/tree"
)

// samplingOptions are the settings beyond temperature, top-k/p and min-p
// that depend on the history (penalties, Mirostat's mu) or reorder the
// distribution (typical-p), greedy and sampled.
var samplingOptions = map[string]engine.SamplerParams{
	"greedy, penalties over 6":      {RepeatPenalty: 1.5, FrequencyPenalty: 1, PresencePenalty: 0.5, RepeatLastN: 6},
	"greedy, penalties over all":    {FrequencyPenalty: 0.7, PresencePenalty: 0.4, RepeatLastN: -1},
	"sampled, penalties over 8":     {Temperature: 1, FrequencyPenalty: 1.5, PresencePenalty: 1, RepeatLastN: 8, Seed: 5},
	"sampled, negative penalties":   {Temperature: 1, FrequencyPenalty: -1, PresencePenalty: -1, Seed: 6},
	"sampled, typical-p":            {Temperature: 1, TopK: 40, TypicalP: 0.5, Seed: 7},
	"mirostat 1":                    {Temperature: 1, Mirostat: 1, MirostatTau: 1, MirostatEta: 0.5, Seed: 8},
	"mirostat 2":                    {Temperature: 1, Mirostat: 2, MirostatTau: 1, MirostatEta: 0.5, Seed: 9},
	"mirostat 2 with all penalties": {Temperature: 0.8, Mirostat: 2, MirostatTau: 4, MirostatEta: 0.2, RepeatPenalty: 1.3, FrequencyPenalty: 0.5, PresencePenalty: 0.5, RepeatLastN: -1, Seed: 10},
}

// Each option gives with speculation the very tokens it gives without,
// whatever the drafter and tree: the acceptor draws each position of the
// path with that path as history, in order, so penalties count and mu
// moves as in plain decoding. Each option changes the text, so the check
// can fail.
func TestSpeculationKeepsSamplingOptions(t *testing.T) {
	m := enginetest.Load(t, "stories260K-f32.gguf")
	defer m.Close()
	dm := enginetest.Load(t, "stories260K-Q8_0-mixed.gguf")
	defer dm.Close()
	target := cpu.NewTarget(m, enginetest.Pool, 0)
	prompt := []int{1, 317, 269, 274, 287}
	for name, params := range samplingOptions {
		plain, _ := enginetest.Generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 60, Sampler: params})
		base := engine.SamplerParams{Temperature: params.Temperature, TopK: params.TopK, Seed: params.Seed}
		if without, _ := enginetest.Generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 60, Sampler: base}); slices.Equal(without, plain) {
			t.Errorf("%s: the same text as without the option: the test cannot tell", name)
		}
		model := drafters.NewModel(cpu.NewTarget(dm, enginetest.Pool, 0))
		for _, c := range []struct {
			drafter string
			d       engine.Drafter
			p       tree.Params
		}{
			{"model", model, tree.Server},
			{"model", model, tree.Params{TopK: 3, Depth: 2, Tokens: 6}},
			{"garbage", &garbage{rng: rand.New(rand.NewPCG(1, 2))}, tree.Params{TopK: 3, Depth: 2, Tokens: 6}},
		} {
			got, st := enginetest.Generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 60, Sampler: params, Drafter: c.d, Tree: c.p})
			if !slices.Equal(got, plain) {
				t.Errorf("%s, %s drafter, %+v: speculative output differs from plain decoding\n got %v\nwant %v", name, c.drafter, c.p, got, plain)
			}
			if c.drafter == "model" && st.Tau() <= 1 {
				t.Errorf("%s, model drafter, %+v: τ %.2f, nothing accepted: the tree was never walked", name, c.p, st.Tau())
			}
		}
	}
}

// Penalties and typical-p keep speculative sampling's distribution the
// target's: the first 3 tokens over many seeds, against the exact joint
// distribution, with a draft that disagrees.
func TestSpeculativeSamplingIsLosslessWithPenalties(t *testing.T) {
	const n = 40000
	target := enginetest.NewMarkov(13, 1, 2)
	draft := enginetest.NewMarkov(13, 2, 2)
	prompt := []int{3, 5, 3}
	params := engine.SamplerParams{Temperature: 1, TypicalP: 0.8, RepeatPenalty: 1.5, FrequencyPenalty: 0.5, PresencePenalty: 0.3, RepeatLastN: 2}
	exact := exactJoint(target, prompt, params, 3)
	req := engine.Request{Prompt: prompt, MaxTokens: 3, Sampler: params,
		Drafter: drafters.NewModel(draft), Tree: tree.Params{TopK: 3, Depth: 2, Tokens: 6}}
	counts := sampleFirst3(t, target, req, n)
	d, bound := tv(exact, counts, n), tvBound(exact, n)
	t.Logf("%d outcomes, TV %.4f, bound %.4f", len(exact), d, bound)
	if d > bound {
		t.Errorf("total variation %.4f > %.4f: not the target's distribution", d, bound)
	}
	// The test can fail: without the penalties the distribution is far.
	plain := params
	plain.RepeatPenalty, plain.FrequencyPenalty, plain.PresencePenalty = 1, 0, 0
	if wrong := tv(exactJoint(target, prompt, plain, 3), counts, n); wrong < 3*bound {
		t.Errorf("the unpenalized distribution is within %.4f: the test cannot tell them apart", wrong)
	}
}
