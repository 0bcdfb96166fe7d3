package dgf

import (
	"math/rand/v2"
	"slices"
	"testing"

	"dovetail/device"
	"dovetail/dgf/dgftest"
)

// A sequence keeps drafting with the version it holds until it refreshes;
// a version nobody holds is the spare whose memory the next publication
// reuses (others are freed); refreshing forgets the cache.
func TestLiveVersions(t *testing.T) {
	d0 := newDraft32(t, dgftest.TinyConfig, 1)
	d1 := newDraft32(t, dgftest.TinyConfig, 2)
	live := NewLive(d0, 5)
	s := live.NewSequence(0)
	rng := rand.New(rand.NewPCG(1, 1))
	w := dgftest.RandWindow(rng, 4, dgftest.TinyConfig.Hidden, dgftest.TinyConfig.Vocab, 0.5)
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
	d2 := newDraft32(t, dgftest.TinyConfig, 3)
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

// A live draft that dropped its float32 matrices publishes versions in
// drafting form only, which draft exactly as a full frozen copy of the
// same weights does, in a fraction of the memory; a snapshot of it
// starts from the Q8_0 values.
func TestLiveDropFloat(t *testing.T) {
	c := freezeConfig
	large := device.HostConfig{Threads: 2, Float32Upto: c.Hidden * c.Hidden}
	dev := device.NewHostWith(large)
	d := newDraftOn(t, dev, c, 5)
	if err := d.FreezeForDrafting(); err != nil {
		t.Fatal(err)
	}
	live := NewLive(d, 0)
	defer live.Close()
	before := device.Held(dev)
	live.DropFloat()
	// The gate and the FFN's three matrices: 64×128 + 3×96×64 floats.
	if dropped := before - device.Held(dev); dropped != 4*(64*128+3*96*64) {
		t.Errorf("DropFloat freed %d bytes", dropped)
	}
	shadow, _, err := live.Snapshot(device.NewHostWith(large))
	if err != nil {
		t.Fatal(err)
	}
	defer shadow.Free()
	for i, p := range d.Params {
		if got, want := shadow.Values(nil, shadow.Params[i]), d.Values(nil, p); !slices.Equal(got, want) {
			t.Fatalf("snapshot's %s differs from the live draft's values", p.Name)
		}
	}
	// Change the shadow's weights as training would, publish it, and
	// draft with both the new version and a full frozen draft of the
	// shadow's weights.
	other := newDraft32(t, c, 6)
	if err := shadow.CopyWeights(other); err != nil {
		t.Fatal(err)
	}
	other.Free()
	w := dgftest.RandWindow(rand.New(rand.NewPCG(5, 5)), 8, c.Hidden, c.Vocab, 1)
	held := device.Held(dev)
	if _, err := live.Publish(shadow); err != nil {
		t.Fatal(err)
	}
	v := live.cur.Load().d
	if !v.DraftingOnly() {
		t.Fatal("a version published after DropFloat holds float32 matrices")
	}
	// The float32 rest, and Q8_0 rows of 34 bytes per 32 values.
	if grew, want := device.Held(dev)-held, uint64(4*(c.Params()-26624)+26624/32*34); grew != want {
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
