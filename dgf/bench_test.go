package dgf

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"dovetail/device"
	"dovetail/device/cuda"
	"dovetail/dgf/dgftest"
	"dovetail/models/draft"
)

// BenchmarkDraftTree times one drafting round's device work: a tree of 6
// levels of 8 nodes after a 64-position context, each level's features
// downloaded and its logits ranked (top 10), as the engine drafts. dev is
// the host, and CUDA where there is a GPU.
func BenchmarkDraftTree(b *testing.B) {
	for _, c := range []draft.Config{
		dgftest.Stories260KDraft,
		dgftest.TinyLlamaDraft,
	} {
		devs := map[string]device.Device{"host": device.NewHost(0)}
		if dev, err := cuda.Open(0); err == nil {
			devs["cuda"] = dev
		}
		for name, dev := range devs {
			b.Run(fmt.Sprintf("%s/H%d-V%d", name, c.Hidden, c.Vocab), func(b *testing.B) { benchTree(b, dev, c) })
		}
	}
}

func benchTree(b *testing.B, dev device.Device, c draft.Config) {
	d := newDraftOn(b, dev, c, 1)
	defer d.Free()
	if err := d.FreezeForDrafting(); err != nil {
		b.Fatal(err)
	}
	benchTreeOf(b, d, 6, 8)
}

// benchTreeOf times levels levels of width nodes after a 64-position
// context on d. The context reads target features (FeatureIn wide), the
// nodes their parents' predicted ones (Hidden wide).
func benchTreeOf(b *testing.B, d *Draft, levels, width int) {
	const ctx = 64
	c := d.C
	rng := rand.New(rand.NewPCG(1, 1))
	s := d.NewSequence(ctx + levels*width)
	defer s.Free()
	w := dgftest.RandWindow(rng, ctx, c.Hidden, c.Vocab, 1)
	if _, _, err := s.Forward(randFeatures(rng, ctx, c.FeatureIn()), w.Tokens[:ctx]); err != nil {
		b.Fatal(err)
	}
	feats, toks, parents := make([][]float32, width), make([]int, width), make([]int, width)
	for i := range width {
		feats[i], toks[i] = w.Features[i], w.Tokens[i]
	}
	b.ResetTimer()
	for range b.N {
		for l := range levels {
			for i := range parents {
				parents[i] = -1
				if l > 0 {
					parents[i] = (l-1)*width + i
				}
			}
			if _, _, err := s.ExtendTop(feats, toks, parents, 10, 1); err != nil {
				b.Fatal(err)
			}
		}
		s.Truncate(ctx)
	}
	ms := float64(b.Elapsed().Microseconds()) / float64(b.N) / 1000
	b.ReportMetric(ms, "ms/round")
	b.ReportMetric(ms/float64(levels), "ms/step")
}
