package runner

import (
	"math/rand/v2"
	"slices"
	"time"

	"dovetail/cpu"
	"dovetail/engine"
)

// BenchResult is what Bench measured of a target on this machine.
type BenchResult struct {
	Kernels       string
	Threads       int
	PrefillTokS   float64
	DecodeTokS    float64
	VerifyRatio   map[int]float64 // T_V(n)/T_T
	BandwidthGBs  float64         // how fast Threads threads read the weights decode reads
	WeightBytes   int64           // read per decoded token
	RooflineShare float64         // decode speed as a share of bandwidth / weight bytes
}

// BenchSizes are the tree sizes Bench verifies.
var BenchSizes = []int{1, 2, 4, 8, 16, 32, 64}

// Bench measures prefill and decode speed (64 tokens each), the cost of
// verifying n draft tokens against one decode step (prefill and
// verification the median of reps),
// all after depth tokens of context, and this machine's memory bandwidth
// on threads threads.
func Bench(m *Model, threads, reps, depth int) (BenchResult, error) {
	pool := cpu.NewPool(threads)
	defer pool.Close()
	f := cpu.NewFast(m.Llama, cpu.DefaultKernels(), pool, 0)
	t := cpu.NewTargetWith(f)
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
