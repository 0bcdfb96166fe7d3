package dgf

import (
	"math/rand/v2"
	"slices"
	"testing"

	"dovetail/device"
	"dovetail/dgf/dgftest"
	"dovetail/models/draft"
)

// newDraft32 is a random float32 draft on the host device.
func newDraft32(t testing.TB, c draft.Config, seed uint64) *Draft {
	t.Helper()
	return newDraftOn(t, device.NewHost(2), c, seed)
}

// newDraftOn is a random draft on dev, its target drawn from seed.
func newDraftOn(t testing.TB, dev device.Device, c draft.Config, seed uint64) *Draft {
	t.Helper()
	d, err := NewDraft(dev, c, dgftest.Target(seed, c))
	if err != nil {
		t.Fatal(err)
	}
	d.Init(seed)
	return d
}

// weights is every parameter's values, in order.
func weights(d *Draft) []float32 {
	var out []float32
	for _, p := range d.Params {
		out = append(out, d.Values(nil, p)...)
	}
	return out
}

// A tree grown with batched Extend calls gives every node the logits and
// feature that a single-path Forward of its path gives.
func TestTreeMatchesPaths(t *testing.T) {
	c := dgftest.TinyConfig
	d := newDraft32(t, c, 5)
	rng := rand.New(rand.NewPCG(5, 5))
	prefix := dgftest.RandWindow(rng, 6, c.Hidden, c.Vocab, 1)
	s := d.NewSequence(0)
	if _, _, err := s.Forward(prefix.Features[:6], prefix.Tokens[1:7]); err != nil {
		t.Fatal(err)
	}
	// Three rounds of expansion: 3 children of the root, then children of
	// some of them, then deeper, with features taken from the parent.
	type node struct {
		parent  int
		tok     int
		feat    []float32
		logits  []float32
		predict []float32
	}
	var nodes []node
	rootPred := prefix.Features[6]
	rounds := [][]int{{-1, -1, -1}, {0, 0, 2}, {3, 5, 5, 1}}
	for _, parents := range rounds {
		var feats [][]float32
		var toks []int
		for _, p := range parents {
			f := rootPred
			if p >= 0 {
				f = nodes[p].predict
			}
			feats = append(feats, f)
			toks = append(toks, rng.IntN(c.Vocab))
		}
		lg, pr, err := s.Extend(feats, toks, parents)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range parents {
			nodes = append(nodes, node{parent: p, tok: toks[i], feat: feats[i],
				logits: append([]float32(nil), lg[i]...), predict: append([]float32(nil), pr[i]...)})
		}
	}
	for i, n := range nodes {
		var path []int
		for x := i; x >= 0; x = nodes[x].parent {
			path = append([]int{x}, path...)
		}
		if err := s.Truncate(6); err != nil {
			t.Fatal(err)
		}
		var feats [][]float32
		var toks []int
		for _, x := range path {
			feats, toks = append(feats, nodes[x].feat), append(toks, nodes[x].tok)
		}
		lg, pr, err := s.Forward(feats, toks)
		if err != nil {
			t.Fatal(err)
		}
		dgftest.CloseTo(t, "logits", lg, n.logits, 1e-5)
		dgftest.CloseTo(t, "feature", pr, n.predict, 1e-5)
	}
}

// freezeConfig has matrices of more and fewer than H×H values.
var freezeConfig = draft.Config{Hidden: 64, Blocks: 1, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 96, Vocab: 40,
	Context: 64, RopeTheta: 10000, RMSEps: 1e-5}

// Drafting multiplies by the Q8_0 copies of the large matrices once a
// draft is frozen, and lands within Q8_0's rounding of the float32
// result: the weights' and, as the host multiplies a large Q8_0 matrix
// the way the target's products do, the activations' (train's
// TestFrozenDraftTrainsOnFloat: training still reads the float32
// weights).
func TestFreezeForDrafting(t *testing.T) {
	c := freezeConfig
	// Larger than H×H: the gate and the FFN's three matrices.
	large := device.HostConfig{Threads: 2, Float32Upto: c.Hidden * c.Hidden}
	d := newDraftOn(t, device.NewHostWith(large), c, 4)
	ref := newDraft32(t, c, 4)
	if err := d.FreezeForDrafting(); err != nil {
		t.Fatal(err)
	}
	var frozen []string
	for _, p := range d.Params {
		if p.Q != nil {
			frozen = append(frozen, p.Name)
		}
	}
	want := []string{draft.NameWz, draft.BlockTensor(0, "ffn_gate.weight"), draft.BlockTensor(0, "ffn_up.weight"), draft.BlockTensor(0, "ffn_down.weight")}
	slices.Sort(frozen)
	slices.Sort(want)
	if !slices.Equal(frozen, want) {
		t.Fatalf("frozen %v, want %v", frozen, want)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	w := dgftest.RandWindow(rng, 6, c.Hidden, c.Vocab, 1)
	sd, sr := d.NewSequence(0), ref.NewSequence(0)
	lg, pred, err := sd.Forward(w.Features[:6], w.Tokens[1:7])
	if err != nil {
		t.Fatal(err)
	}
	lg, pred = slices.Clone(lg), slices.Clone(pred)
	lgRef, predRef, err := sr.Forward(w.Features[:6], w.Tokens[1:7])
	if err != nil {
		t.Fatal(err)
	}
	dgftest.CloseTo(t, "frozen feature", pred, predRef, 0.15)
	dgftest.CloseTo(t, "frozen logits", lg, lgRef, 0.15)
	if slices.Equal(pred, predRef) {
		t.Error("the frozen draft predicted the float32 draft's very features: its Q8_0 copies went unused")
	}
	sd.Free()
	sr.Free()
}
