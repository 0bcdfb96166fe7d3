package gpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"dovetail/models/draft"
)

// Training throughput in positions per second on the host device, for
// drafts of the shapes of the two test models (M = 1).
func BenchmarkTrainStep(b *testing.B) {
	for _, c := range []draft.Config{
		{Hidden: 64, Blocks: 1, Heads: 8, KVHeads: 4, HeadDim: 8, FFN: 172, Vocab: 512, Context: 512, RopeTheta: 10000, RMSEps: 1e-5},
		{Hidden: 128, Blocks: 1, Heads: 8, KVHeads: 4, HeadDim: 16, FFN: 384, Vocab: 2048, Context: 512, RopeTheta: 10000, RMSEps: 1e-6},
	} {
		b.Run(fmt.Sprintf("H%d-V%d", c.Hidden, c.Vocab), func(b *testing.B) { benchTrainOn(b, newHost[float32](2), c) })
	}
}

// benchDraft is a draft of shape c on dev with random weights and a
// random target, and the random source that made them.
func benchDraft(b *testing.B, dev Device, c draft.Config) (*Draft, *rand.Rand) {
	rng := rand.New(rand.NewPCG(1, 1))
	d, err := NewDraft(dev, c, fakeTarget(rng, c.Hidden, c.Vocab))
	if err != nil {
		b.Fatal(err)
	}
	d.Init(1)
	return d, rng
}

// benchTrainOn times optimizer steps of a draft of shape c on dev, over
// batches of 8 windows of 256 positions.
func benchTrainOn(b *testing.B, dev Device, c draft.Config) {
	d, rng := benchDraft(b, dev, c)
	defer d.Free()
	tr, err := NewTrainer(d, DefaultTrainConfig(), 2048, 256)
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Free()
	var ws []Window
	for range 8 {
		ws = append(ws, randWindow(rng, 256, c.Hidden, c.Vocab, 1))
	}
	// The first step loads kernels and sizes library workspaces.
	if _, err := tr.Step(ws); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		tr.Step(ws)
	}
	// The last update may still be running: a reduction waits for it.
	dev.Sum(d.Params[0].W)
	b.ReportMetric(float64(b.N*2048)/b.Elapsed().Seconds(), "pos/s")
}

// tinyLlamaDraft is the draft of a TinyLlama-1.1B target (M = 1), the
// smallest real target whose draft is worth a GPU.
var tinyLlamaDraft = draft.Config{Hidden: 2048, Blocks: 1, Heads: 32, KVHeads: 4, HeadDim: 64, FFN: 5632, Vocab: 32000,
	Context: 2048, RopeTheta: 10000, RMSEps: 1e-5}

// BenchmarkDraftTree times one drafting round's device work: a tree of 6
// levels of 8 nodes after a 64-position context, each level's features
// downloaded and its logits ranked (top 10), as the engine drafts. dev is
// the host, and CUDA where there is a GPU.
func BenchmarkDraftTree(b *testing.B) {
	for _, c := range []draft.Config{
		{Hidden: 64, Blocks: 1, Heads: 8, KVHeads: 4, HeadDim: 8, FFN: 172, Vocab: 512, Context: 512, RopeTheta: 10000, RMSEps: 1e-5},
		tinyLlamaDraft,
	} {
		devs := map[string]Device{"host": newHost[float32](0)}
		if dev, err := NewCUDA(0); err == nil {
			devs["cuda"] = dev
		}
		for name, dev := range devs {
			b.Run(fmt.Sprintf("%s/H%d-V%d", name, c.Hidden, c.Vocab), func(b *testing.B) { benchTree(b, dev, c) })
		}
	}
}

func benchTree(b *testing.B, dev Device, c draft.Config) {
	const ctx, levels, width = 64, 6, 8
	d, rng := benchDraft(b, dev, c)
	defer d.Free()
	if err := d.FreezeForDrafting(); err != nil {
		b.Fatal(err)
	}
	s := d.NewSequence(ctx + levels*width)
	defer s.Free()
	w := randWindow(rng, ctx, c.Hidden, c.Vocab, 1)
	if _, _, err := s.Forward(w.Features[:ctx], w.Tokens[:ctx]); err != nil {
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
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/round")
}
