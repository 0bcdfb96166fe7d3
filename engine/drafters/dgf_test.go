package drafters_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"dovetail/assets"
	"dovetail/cpu"
	"dovetail/device"
	"dovetail/dgf"
	"dovetail/engine"
	"dovetail/engine/drafters"
	"dovetail/engine/enginetest"
	"dovetail/engine/tree"
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
	dev := device.NewHost(2)
	for _, gc := range cases {
		// One case of each model runs every tree shape and both drafts;
		// the others one of each.
		shapes, blockCounts := []tree.Params{tree.Server}, []int{1}
		if strings.HasSuffix(gc.Name, "-f32-p1") {
			shapes = append(shapes, tree.Laptop, tree.Params{TopK: 1, Depth: 0, Tokens: 1}, tree.Params{TopK: 3, Depth: 5, Tokens: 40})
			blockCounts = []int{1, 2}
		}
		m := enginetest.Load(t, filepath.Base(gc.Model))
		target := cpu.NewTarget(m, enginetest.Pool, 0)
		plain, _ := enginetest.Generate(t, target, engine.Request{Prompt: gc.PromptTokens, MaxTokens: 40})
		for _, blocks := range blockCounts {
			d, err := dgf.NewDraft(dev, draft.ForTarget(m.Config, blocks, 0), m)
			if err != nil {
				t.Fatal(err)
			}
			d.Init(uint64(blocks))
			seq := d.NewSequence(0)
			drafter := drafters.NewDGF(seq)
			for _, p := range shapes {
				got, st := enginetest.Generate(t, target, engine.Request{Prompt: gc.PromptTokens, MaxTokens: 40, Drafter: drafter, Tree: p})
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
type logitsOnly struct{ drafters.FeatureModel }

// A draft that ranks its own logits on the device (dgf.Sequence's
// ForwardTop and ExtendTop) drafts the very trees that ranking downloaded
// logits on the host gives: the same rounds, acceptances and output, with
// the embedded model's trained draft, sharpened as for greedy decoding.
func TestDGFRankedTreesEqualLogitTrees(t *testing.T) {
	m := enginetest.Load(t, "tinystories656K-Q8_0.gguf")
	defer m.Close()
	ck, err := draft.Parse(assets.DefaultDraftName, assets.DefaultDraft)
	if err != nil {
		t.Fatal(err)
	}
	target := cpu.NewTarget(m, enginetest.Pool, 0)
	tok, err := tokenizer.New(m.File)
	if err != nil {
		t.Fatal(err)
	}
	prompt := tok.Encode("Once upon a time, a little fox", true, false)
	var outs [2][]int
	var stats [2]engine.Stats
	for i, ranked := range []bool{true, false} {
		d, err := dgf.NewDraft(device.NewHost(2), ck.Config, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Load(ck); err != nil {
			t.Fatal(err)
		}
		seq := d.NewSequence(0)
		var fm drafters.FeatureModel = seq
		if !ranked {
			fm = logitsOnly{seq}
		}
		drafter := drafters.NewDGF(fm)
		drafter.Sharpness = 2
		outs[i], stats[i] = enginetest.Generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 60, Drafter: drafter, Tree: tree.Server})
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

// rowCounter counts the positions a draft's Forward and ForwardTop run.
type rowCounter struct {
	*dgf.Sequence
	rows int
}

func (c *rowCounter) Forward(f [][]float32, tokens []int) ([]float32, []float32, error) {
	c.rows += len(tokens)
	return c.Sequence.Forward(f, tokens)
}

func (c *rowCounter) ForwardTop(f [][]float32, tokens []int, k int, scale float32) ([]tree.Choice, []float32, error) {
	c.rows += len(tokens)
	return c.Sequence.ForwardTop(f, tokens, k, scale)
}

// A drafter that caught up on the committed positions (CatchUp, as the
// engine calls it after plain steps) then runs the root's position alone
// and drafts the tree it would have drafted without: catching up is the
// same work, timed apart.
func TestDGFCatchUpDraftsTheSameTree(t *testing.T) {
	m := enginetest.Load(t, "tinystories656K-Q8_0.gguf")
	defer m.Close()
	ck, err := draft.Parse(assets.DefaultDraftName, assets.DefaultDraft)
	if err != nil {
		t.Fatal(err)
	}
	d, err := dgf.NewDraft(device.NewHost(2), ck.Config, m)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Free()
	if err := d.Load(ck); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.New(m.File)
	if err != nil {
		t.Fatal(err)
	}
	target := cpu.NewTarget(m, enginetest.Pool, 0)
	ctx := tok.Encode("Once upon a time, a little fox", true, false)
	logits, hidden, err := target.ForwardFeatures(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var seqs [2]*rowCounter
	var drs [2]*drafters.DGF
	for i := range seqs {
		seqs[i] = &rowCounter{Sequence: d.NewSequence(0)}
		defer seqs[i].Free()
		drs[i] = drafters.NewDGF(seqs[i])
		drs[i].Prefilled(ctx, hidden)
	}
	// Twelve plain greedy steps: each root runs and is accepted alone.
	root := golden.Argmax(logits)
	for range 12 {
		ctx = append(ctx, root)
		if logits, hidden, err = target.ForwardFeatures([]int{root}); err != nil {
			t.Fatal(err)
		}
		for _, dr := range drs {
			dr.Accepted([]int{root}, hidden)
		}
		root = golden.Argmax(logits)
	}
	ctx = append(ctx, root)
	n, err := drs[0].CatchUp(ctx)
	if err != nil || n != len(ctx)-2 {
		t.Fatalf("CatchUp ran %d positions (%v), want %d: all but the root's", n, err, len(ctx)-2)
	}
	seqs[0].rows = 0
	var trees [2]*tree.Tree
	for i, dr := range drs {
		if trees[i], err = dr.Draft(ctx, tree.Server); err != nil {
			t.Fatal(err)
		}
	}
	if seqs[0].rows != 1 {
		t.Errorf("after CatchUp, Draft ran %d positions, want the root's alone", seqs[0].rows)
	}
	a, b := trees[0], trees[1]
	if a.Len() == 0 || !slices.Equal(a.Tokens, b.Tokens) || !slices.Equal(a.Parents, b.Parents) {
		t.Errorf("caught up first: tree %v %v; in one call: %v %v", a.Tokens, a.Parents, b.Tokens, b.Parents)
	}
	// Caught up already: nothing more to run.
	if n, err := drs[0].CatchUp(ctx); n != 0 || err != nil {
		t.Errorf("CatchUp again: %d positions (%v), want 0", n, err)
	}
}
