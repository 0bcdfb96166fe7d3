package gpu

import (
	"dovetail/models/draft"
	"math/rand/v2"
	"slices"
	"testing"
)

func weights(d *Draft) []float32 {
	var out []float32
	for _, p := range d.Params {
		out = append(out, d.values(nil, p)...)
	}
	return out
}

// A sequence keeps drafting with the version it holds until it refreshes;
// a version nobody holds is the spare whose memory the next publication
// reuses (others are freed); refreshing forgets the cache.
func TestLiveVersions(t *testing.T) {
	d0 := newDraft32(t, tinyConfig, 1)
	d1 := newDraft32(t, tinyConfig, 2)
	live := NewLive(d0, 5)
	s := live.NewSequence(0)
	rng := rand.New(rand.NewPCG(1, 1))
	w := randWindow(rng, 4, tinyConfig.Hidden, tinyConfig.Vocab, 0.5)
	if _, _, err := s.Forward(w.Features[:4], w.Tokens[1:5]); err != nil {
		t.Fatal(err)
	}
	want1 := weights(d1)
	v, err := live.Publish(d1)
	if err != nil || v != 6 || live.Version() != 6 {
		t.Fatalf("publish: version %d, %v; live %d", v, err, live.Version())
	}
	if d0.Params[0].W.Len() == 0 {
		t.Fatal("version 5 freed while a sequence holds it")
	}
	if s.Version() != 5 || s.Len() != 4 {
		t.Fatalf("before refresh: version %d, %d positions", s.Version(), s.Len())
	}
	if v, switched := s.Refresh(); !switched || v != 6 || s.Len() != 0 {
		t.Fatalf("refresh: version %d switched %v, %d positions", v, switched, s.Len())
	}
	if live.spare != d0 || d0.Params[0].W.Len() == 0 {
		t.Fatal("version 5 is not the spare once nobody holds it")
	}
	if !slices.Equal(weights(s.d), want1) {
		t.Fatal("version 6 does not have the published weights")
	}
	if _, switched := s.Refresh(); switched {
		t.Fatal("refresh switched without a newer version")
	}
	// KeepCache switches weights and keeps the positions. The new version
	// is the spare's memory with the published weights.
	s.Forward(w.Features[:3], w.Tokens[1:4])
	s.KeepCache = true
	d2 := newDraft32(t, tinyConfig, 3)
	want2 := weights(d2)
	live.Publish(d2)
	if _, switched := s.Refresh(); !switched || s.Len() != 3 {
		t.Fatalf("refresh with KeepCache: switched %v, %d positions, want 3", switched, s.Len())
	}
	if s.d != d0 || !slices.Equal(weights(s.d), want2) || live.spare == nil {
		t.Fatal("version 7 did not reuse the spare's memory with the published weights, or version 6 is not the spare")
	}
	spare := live.spare
	cur := s.d
	s.Free()
	if cur.Params[0].W.Len() == 0 {
		t.Fatal("the newest version freed while the live draft holds it")
	}
	live.Close()
	if cur.Params[0].W.Len() != 0 || spare.Params[0].W.Len() != 0 {
		t.Fatal("the newest version or the spare not freed after Close")
	}
}

// The learner trains its shadow without touching the live draft, compares
// it with the kept version, and Restore undoes a trial publication.
func TestLearner(t *testing.T) {
	live := NewLive(newDraft32(t, tinyConfig, 1), 0)
	defer live.Close()
	start := weights(live.cur.Load().d)
	cfg := DefaultTrainConfig()
	cfg.Warmup, cfg.LR = 0, 1e-2
	l := NewLearner(live, newHost[float32](1), cfg, 32, 8, 3)
	defer l.Free()
	rng := rand.New(rand.NewPCG(2, 2))
	ws := []Window{randWindow(rng, 8, 8, 16, 0.5), randWindow(rng, 8, 8, 16, 0.5)}
	sh, kept, err := l.Compare(ws)
	if err != nil || sh != kept {
		t.Fatalf("before training, shadow %+v and kept %+v differ (%v)", sh, kept, err)
	}
	first, _ := l.Train(ws)
	var last float64
	for range 30 {
		s, err := l.Train(ws)
		if err != nil {
			t.Fatal(err)
		}
		last = s.Loss
	}
	if last >= first.Loss {
		t.Fatalf("training loss %g → %g", first.Loss, last)
	}
	if !slices.Equal(weights(live.cur.Load().d), start) {
		t.Fatal("training changed the live draft")
	}
	sh, kept, _ = l.Compare(ws)
	if sh.Loss >= kept.Loss || sh.Tau < 1 || sh.Tau > 4 {
		t.Fatalf("after training on the windows: shadow %+v, kept %+v", sh, kept)
	}
	if v, err := l.Publish(false); err != nil || v != 1 || l.Version() != 0 {
		t.Fatalf("trial publication: version %d (kept %d), %v", v, l.Version(), err)
	}
	if err := l.Restore(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(weights(live.cur.Load().d), start) || !slices.Equal(weights(l.shadow), start) {
		t.Fatal("Restore did not bring back the kept weights")
	}
	for range 5 {
		l.Train(ws)
	}
	if v, err := l.Publish(true); err != nil || v != l.Version() || !slices.Equal(weights(live.cur.Load().d), weights(l.shadow)) {
		t.Fatalf("kept publication: version %d (kept %d), %v", v, l.Version(), err)
	}
}

// The simulated chain τ counts each position's leading agreeing steps,
// over the positions every step reaches.
func TestChainTau(t *testing.T) {
	b := &batch{lens: []int{4, 3}, off: []int{0, 4}}
	agree := [][]float32{
		{1, 1, 0, 1, 1, 1, 1},
		{1, 0, 1, 9, 1, 0, 9},
		{0, 1, 1, 9, 1, 9, 9},
	}
	// Window 0, positions 0 and 1: runs 2 and 1; window 1, position 0: 3.
	if got, want := chainTau(agree, b), 1+6.0/3; got != want {
		t.Fatalf("τ %g, want %g", got, want)
	}
}

// largeOnly makes the host treat matrices of more than n values as large
// ones (quantized for drafting, kept in their stored form) for the rest
// of the test: the test drafts are small.
func largeOnly(t *testing.T, n int) {
	fm, sm := freezeMin, smallMatrix
	freezeMin, smallMatrix = n, n
	t.Cleanup(func() { freezeMin, smallMatrix = fm, sm })
}

// A live draft that dropped its float32 matrices publishes versions in
// drafting form only, which draft exactly as a full frozen copy of the
// same weights does, in a fraction of the memory; a snapshot of it
// starts from the Q8_0 values.
func TestLiveDropFloat(t *testing.T) {
	c := draft.Config{Hidden: 64, Blocks: 1, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 96, Vocab: 40,
		Context: 64, RopeTheta: 10000, RMSEps: 1e-5}
	largeOnly(t, c.Hidden*c.Hidden)
	d := newDraft32(t, c, 5)
	if err := d.FreezeForDrafting(); err != nil {
		t.Fatal(err)
	}
	dev := d.Dev.(*host[float32])
	live := NewLive(d, 0)
	defer live.Close()
	before := dev.Held()
	live.DropFloat()
	// The gate and the FFN's three matrices: 64×128 + 3×96×64 floats.
	if dropped := before - dev.Held(); dropped != 4*(64*128+3*96*64) {
		t.Errorf("DropFloat freed %d bytes", dropped)
	}
	shadow, _, err := live.Snapshot(newHost[float32](1))
	if err != nil {
		t.Fatal(err)
	}
	defer shadow.Free()
	for i, p := range d.Params {
		if got, want := shadow.values(nil, shadow.Params[i]), d.values(nil, p); !slices.Equal(got, want) {
			t.Fatalf("snapshot's %s differs from the live draft's values", p.Name)
		}
	}
	// Train the shadow a little, publish it, and draft with both the new
	// version and a full frozen draft of the shadow's weights.
	rng := rand.New(rand.NewPCG(5, 5))
	tr, err := NewTrainer(shadow, DefaultTrainConfig(), 16, 16)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Free()
	w := randWindow(rng, 8, c.Hidden, c.Vocab, 1)
	for range 3 {
		if _, err := tr.Step([]Window{w}); err != nil {
			t.Fatal(err)
		}
	}
	held := dev.Held()
	if _, err := live.Publish(shadow); err != nil {
		t.Fatal(err)
	}
	v := live.cur.Load().d
	if !v.draftingOnly() {
		t.Fatal("a version published after DropFloat holds float32 matrices")
	}
	// The float32 rest, and Q8_0 rows of 34 bytes per 32 values.
	if grew, want := dev.Held()-held, uint64(4*(c.Params()-26624)+26624/32*34); grew != want {
		t.Errorf("a drafting-only version took %d bytes, want %d (the float32 draft: %d)", grew, want, 4*c.Params())
	}
	full, err := shadow.Clone(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Free()
	if err := full.FreezeForDrafting(); err != nil {
		t.Fatal(err)
	}
	s1, s2 := live.NewSequence(0), full.NewSequence(0)
	defer s1.Free()
	defer s2.Free()
	lg1, pred1, err := s1.Forward(w.Features[:6], w.Tokens[1:7])
	if err != nil {
		t.Fatal(err)
	}
	lg2, pred2, err := s2.Forward(w.Features[:6], w.Tokens[1:7])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lg1, lg2) || !slices.Equal(pred1, pred2) {
		t.Error("the drafting-only version drafts differently from a frozen copy of the same weights")
	}
}
