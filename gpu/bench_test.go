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
		b.Run(fmt.Sprintf("H%d-V%d", c.Hidden, c.Vocab), func(b *testing.B) { benchTrain(b, c) })
	}
}

func benchTrain(b *testing.B, c draft.Config) {
	rng := rand.New(rand.NewPCG(1, 1))
	d, _ := NewDraft(newHost[float32](2), c, fakeTarget(rng, c.Hidden, c.Vocab))
	d.Init(1)
	tr, _ := NewTrainer(d, DefaultTrainConfig(), 2048, 256)
	var ws []Window
	for range 8 {
		ws = append(ws, randWindow(rng, 256, c.Hidden, c.Vocab, 1))
	}
	b.ResetTimer()
	for range b.N {
		tr.Step(ws)
	}
	b.ReportMetric(float64(b.N*2048)/b.Elapsed().Seconds(), "pos/s")
}
