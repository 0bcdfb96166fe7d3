package drafters_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"dovetail/assets"
	"dovetail/cpu"
	"dovetail/device"
	"dovetail/dgf"
	"dovetail/engine/drafters"
	"dovetail/engine/enginetest"
	"dovetail/engine/tree"
	"dovetail/models/draft"
	"dovetail/models/tokenizer"
)

// advanceCounter counts Advance calls and cancels a context at the first.
type advanceCounter struct {
	*dgf.Sequence
	calls  int
	cancel context.CancelFunc // nil: none
}

func (a *advanceCounter) Advance(f [][]float32, tokens []int) error {
	a.calls++
	if a.cancel != nil {
		a.cancel()
	}
	return a.Sequence.Advance(f, tokens)
}

// rankingOnly is a sequence that cannot commit without computing outputs
// (no Advancer): it drafts over a long context in one pass.
type rankingOnly struct {
	drafters.FeatureModel
	drafters.RankingModel
}

// longContext is 400 positions of the embedded model's text with their
// features, and a draft of the shipped weights.
func longContext(t *testing.T) (*dgf.Draft, []int, [][]float32) {
	t.Helper()
	m := enginetest.Load(t, "tinystories656K-Q8_0.gguf")
	t.Cleanup(func() { m.Close() })
	ck, err := draft.Parse(assets.DefaultDraftName, assets.DefaultDraft)
	if err != nil {
		t.Fatal(err)
	}
	d, err := dgf.NewDraft(device.NewHost(2), ck.Config, m)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Free)
	if err := d.Load(ck); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.New(m.File)
	if err != nil {
		t.Fatal(err)
	}
	var ctx []int
	for len(ctx) < 400 {
		ctx = append(ctx, tok.Encode("Once upon a time, a little fox found a red ball in the park. ", len(ctx) == 0, false)...)
	}
	ctx = ctx[:400]
	_, hidden, err := cpu.NewTarget(m, enginetest.Pool, 0).ForwardFeatures(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return d, ctx, hidden
}

// A drafter reading a long context again (new weights, or after plain
// steps) stops between chunks once the request's context ends, and
// drafts, uncancelled, the tree it drafts in one pass.
func TestDGFLongCatchUpStopsOnCancel(t *testing.T) {
	d, ctx, hidden := longContext(t)
	for _, catchUp := range []bool{true, false} {
		seq := &advanceCounter{Sequence: d.NewSequence(0)}
		defer seq.Free()
		dr := drafters.NewDGF(seq)
		dr.Prefilled(ctx, hidden)
		c, cancel := context.WithCancel(context.Background())
		seq.cancel = cancel
		dr.BindContext(c)
		var err error
		if catchUp {
			_, err = dr.CatchUp(ctx)
		} else {
			_, err = dr.Draft(ctx, tree.Server)
		}
		if !errors.Is(err, context.Canceled) || seq.calls != 1 {
			t.Errorf("catch-up %v: cancelled during the first chunk: %v after %d chunks, want context.Canceled after 1", catchUp, err, seq.calls)
		}
	}
	// Uncancelled, in chunks: the tree of one pass.
	chunked, whole := d.NewSequence(0), d.NewSequence(0)
	defer chunked.Free()
	defer whole.Free()
	var trees [2]*tree.Tree
	for i, m := range []drafters.FeatureModel{chunked, rankingOnly{whole, whole}} {
		dr := drafters.NewDGF(m)
		dr.Prefilled(ctx, hidden)
		dr.BindContext(context.Background())
		var err error
		if trees[i], err = dr.Draft(ctx, tree.Server); err != nil {
			t.Fatal(err)
		}
	}
	a, b := trees[0], trees[1]
	if a.Len() == 0 || !slices.Equal(a.Tokens, b.Tokens) || !slices.Equal(a.Parents, b.Parents) {
		t.Errorf("in chunks: tree %v %v; in one pass: %v %v", a.Tokens, a.Parents, b.Tokens, b.Parents)
	}
}
