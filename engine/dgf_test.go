package engine_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"dovetail/cpu"
	"dovetail/engine"
	"dovetail/gpu"
	"dovetail/internal/golden"
	"dovetail/models/draft"
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
