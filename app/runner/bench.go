package runner

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"dovetail/cpu"
	"dovetail/device/cuda"
	"dovetail/engine"
	"dovetail/offload"
)

// BenchResult is what Bench measured of a target on this machine.
type BenchResult struct {
	Kernels       string
	Threads       int
	GPULayers     int    // the target's last layers on the GPU (with its LM head)
	GPU           string // where they ran ("": none)
	PrefillTokS   float64
	DecodeTokS    float64
	VerifyRatio   map[int]float64 // T_V(n)/T_T
	BandwidthGBs  float64         // how fast Threads threads read the weights decode reads
	WeightBytes   int64           // read per decoded token
	RooflineShare float64         // decode speed as a share of bandwidth / weight bytes (CPU only; 0 with GPU layers)
}

// BenchSizes are the tree sizes Bench verifies.
var BenchSizes = []int{1, 2, 4, 8, 16, 32, 64}

// Bench measures prefill and decode speed (64 tokens each), the cost of
// verifying n draft tokens against one decode step (prefill and
// verification the median of reps),
// all after depth tokens of context, and this machine's memory bandwidth
// on threads threads.
func Bench(m *Model, threads, reps, depth, gpuLayers int) (BenchResult, error) {
	pool := cpu.NewPool(threads)
	defer pool.Close()
	off, err := benchLayers(m, gpuLayers)
	if err != nil {
		return BenchResult{}, err
	}
	defer off.close()
	f := cpu.NewFastWith(m.Llama, cpu.DefaultKernels(), pool, 0, cpu.Options{Offload: off.cpuSide()})
	t := cpu.NewTargetWith(f)
	defer t.Close()
	if err := t.Err(); err != nil {
		return BenchResult{}, err
	}
	prof, err := engine.ProfileTargetAt(t, depth, 64, 64, BenchSizes, reps)
	if err != nil {
		return BenchResult{}, err
	}
	prefill, err := medianPrefill(t, depth, 64, reps)
	if err != nil {
		return BenchResult{}, err
	}
	res := BenchResult{Kernels: f.K.Name, Threads: threads, PrefillTokS: prefill,
		DecodeTokS: prof.DecodeTokensPerSec, VerifyRatio: map[int]float64{}, WeightBytes: f.WeightBytesPerToken()}
	for _, n := range BenchSizes {
		res.VerifyRatio[n] = prof.VerifyRatio(n)
	}
	if off != nil {
		// The roofline of a split is two memories': the costs are what
		// the split measures.
		res.GPULayers, res.GPU = m.Config().Layers-off.layers.From, off.dev.Name()
		return res, nil
	}
	// Decode reads the weights once per token: the roofline is a read of
	// those weights by these threads, and the share the time of that read
	// over a decode step's.
	var read int64
	res.BandwidthGBs, read = f.MeasureWeightRead(threads, 5)
	res.RooflineShare = res.DecodeTokS * float64(read) / (res.BandwidthGBs * 1e9)
	return res, nil
}

// medianPrefill is the median of reps timed forwards of n random tokens
// after depth tokens of context (filled first, not timed), in tokens/s.
// The profile times one, its process's first forward of n rows, which
// grows and pages in the buffers that size needs (at two threads it took
// twice as long as the next), and a 64-token forward of a small model
// takes a few milliseconds, which one hiccup of a shared host can double.
// Run after the profile, as llama-bench times its runs after a warm-up.
func medianPrefill(t engine.Target, depth, n, reps int) (float64, error) {
	rng := rand.New(rand.NewPCG(3, 4))
	if err := t.Truncate(0); err != nil {
		return 0, err
	}
	if err := engine.FillContext(t, depth, rng); err != nil {
		return 0, err
	}
	toks := make([]int, n)
	times := make([]time.Duration, reps)
	for r := range times {
		if err := t.Truncate(depth); err != nil {
			return 0, err
		}
		for i := range toks {
			toks[i] = rng.IntN(t.Vocab())
		}
		start := time.Now()
		if _, err := t.Forward(toks); err != nil {
			return 0, err
		}
		times[r] = time.Since(start)
	}
	slices.Sort(times)
	return float64(n) / times[reps/2].Seconds(), nil
}

// benchLayers puts the target's last k layers and its LM head on CUDA
// device 0 for Bench (nil: k is 0).
func benchLayers(m *Model, k int) (*gpuLayers, error) {
	L := m.Config().Layers
	switch {
	case k == 0:
		return nil, nil
	case k < 0 || k > L:
		return nil, fmt.Errorf("--gpu-layers %d: the model has %d layers", k, L)
	}
	if err := offload.Check(m.Llama); err != nil {
		return nil, fmt.Errorf("--gpu-layers %d: %w", k, err)
	}
	dev, err := cuda.Open(0)
	if errors.Is(err, cuda.ErrNoDevice) {
		return nil, fmt.Errorf("--gpu-layers %d: no NVIDIA GPU here (%v)", k, err)
	} else if err != nil {
		return nil, fmt.Errorf("--gpu-layers %d: %w", k, err)
	}
	layers, err := offload.New(dev, m.Llama, L-k)
	if err != nil {
		dev.Close()
		return nil, fmt.Errorf("--gpu-layers %d on %s: %w", k, dev.Name(), err)
	}
	return &gpuLayers{dev: dev, layers: layers}, nil
}
