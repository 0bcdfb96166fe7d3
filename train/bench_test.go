package train

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"dovetail/device"
	"dovetail/device/cuda/cudatest"
	"dovetail/dgf"
	"dovetail/dgf/dgftest"
	"dovetail/models/draft"
)

// Training throughput in positions per second on the host device, for
// drafts of the shapes of the two test models (M = 1).
func BenchmarkTrainStep(b *testing.B) {
	for _, c := range []draft.Config{
		dgftest.Stories260KDraft,
		dgftest.TinyStories656KDraft,
	} {
		b.Run(fmt.Sprintf("H%d-V%d", c.Hidden, c.Vocab), func(b *testing.B) { benchTrainOn(b, device.NewHost(2), c) })
	}
}

// benchTrainOn times optimizer steps of a draft of shape c on dev, over
// batches of 8 windows of 256 positions.
func benchTrainOn(b *testing.B, dev device.Device, c draft.Config) {
	d, err := dgf.NewDraft(dev, c, dgftest.Target(1, c))
	if err != nil {
		b.Fatal(err)
	}
	d.Init(1)
	rng := rand.New(rand.NewPCG(1, 1))
	defer d.Free()
	tr, err := NewTrainer(d, DefaultTrainConfig(), 2048, 256)
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Free()
	var ws []Window
	for range 8 {
		ws = append(ws, dgftest.RandWindow(rng, 256, c.Hidden, c.Vocab, 1))
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

// Training throughput on the CUDA device, for the shapes of
// BenchmarkTrainStep and a TinyLlama-1.1B target's draft.
func BenchmarkCUDATrainStep(b *testing.B) {
	dev := cudatest.Device(b)
	for _, c := range []draft.Config{
		dgftest.Stories260KDraft,
		dgftest.TinyStories656KDraft,
		dgftest.TinyLlamaDraft,
	} {
		b.Run(fmt.Sprintf("H%d-V%d", c.Hidden, c.Vocab), func(b *testing.B) { benchTrainOn(b, dev, c) })
	}
}
