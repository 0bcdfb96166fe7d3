package engine_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"dovetail/assets"
	"dovetail/cpu"
	"dovetail/engine"
	"dovetail/gpu"
	"dovetail/internal/golden"
	"dovetail/models/draft"
	"dovetail/models/tokenizer"
)

// The DGF drafter (a draft of one and of two blocks on the host device)
// gives greedy output equal to plain decoding on every test model. The
// drafts are untrained, so this exercises rejection; the trained draft
// of the embedded model (app/cli's tests) exercises acceptance.
func TestDGFGreedyEqualsPlain(t *testing.T) {
	cases, err := golden.Cases()
	if err != nil {
		t.Fatal(err)
	}
	dev := gpu.NewHost(2)
	for _, gc := range cases {
		// One case of each model runs every tree shape and both drafts;
		// the others one of each.
		shapes, blockCounts := []engine.TreeParams{engine.ServerTree}, []int{1}
		if strings.HasSuffix(gc.Name, "-f32-p1") {
			shapes = append(shapes, engine.LaptopTree, engine.TreeParams{TopK: 1, Depth: 0, Tokens: 1}, engine.TreeParams{TopK: 3, Depth: 5, Tokens: 40})
			blockCounts = []int{1, 2}
		}
		m := load(t, filepath.Base(gc.Model))
		target := cpu.NewTarget(m, pool, 0)
		plain, _ := generate(t, target, engine.Request{Prompt: gc.PromptTokens, MaxTokens: 40})
		for _, blocks := range blockCounts {
			d, err := gpu.NewDraft(dev, draft.ForTarget(m.Config, blocks, 0), m)
			if err != nil {
				t.Fatal(err)
			}
			d.Init(uint64(blocks))
			seq := d.NewSequence(0)
			drafter := engine.NewDGFDrafter(seq)
			for _, p := range shapes {
				got, st := generate(t, target, engine.Request{Prompt: gc.PromptTokens, MaxTokens: 40, Drafter: drafter, Tree: p})
				if !slices.Equal(got, plain) {
					t.Errorf("%s, %d blocks, %+v: speculative output differs from plain greedy\n got %v\nwant %v", gc.Name, blocks, p, got, plain)
				}
				if st.Rounds == 0 || st.Tau() < 1 {
					t.Errorf("%s: %d rounds, τ %.2f", gc.Name, st.Rounds, st.Tau())
				}
			}
			seq.Free()
			d.Free()
		}
		m.Close()
	}
}

// logitsOnly hides a draft's ranking (RankingModel): the drafter then
// ranks downloaded logits itself.
type logitsOnly struct{ engine.FeatureModel }

// A draft that ranks its own logits on the device (gpu.Sequence's
// ForwardTop and ExtendTop) drafts the very trees that ranking downloaded
// logits on the host gives: the same rounds, acceptances and output, with
// the embedded model's trained draft, sharpened as for greedy decoding.
func TestDGFRankedTreesEqualLogitTrees(t *testing.T) {
	m := load(t, "tinystories656K-Q8_0.gguf")
	defer m.Close()
	ck, err := draft.Parse(assets.DefaultDraftName, assets.DefaultDraft)
	if err != nil {
		t.Fatal(err)
	}
	target := cpu.NewTarget(m, pool, 0)
	tok, err := tokenizer.New(m.File)
	if err != nil {
		t.Fatal(err)
	}
	prompt := tok.Encode("Once upon a time, a little fox", true, false)
	var outs [2][]int
	var stats [2]engine.Stats
	for i, ranked := range []bool{true, false} {
		d, err := gpu.NewDraft(gpu.NewHost(2), ck.Config, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Load(ck); err != nil {
			t.Fatal(err)
		}
		seq := d.NewSequence(0)
		var fm engine.FeatureModel = seq
		if !ranked {
			fm = logitsOnly{seq}
		}
		drafter := engine.NewDGFDrafter(fm)
		drafter.Sharpness = 2
		outs[i], stats[i] = generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 60, Drafter: drafter, Tree: engine.ServerTree})
		seq.Free()
		d.Free()
	}
	r, l := stats[0], stats[1]
	if !slices.Equal(outs[0], outs[1]) || r.Rounds != l.Rounds || r.Accepted != l.Accepted || !slices.Equal(r.DepthReached, l.DepthReached) {
		t.Errorf("ranked on the device: %d rounds, %d accepted, depths %v; ranked on the host: %d, %d, %v",
			r.Rounds, r.Accepted, r.DepthReached, l.Rounds, l.Accepted, l.DepthReached)
	}
	if r.Accepted == 0 {
		t.Error("the trained draft had nothing accepted")
	}
}
