package runner

import (
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
// verifying n draft tokens against one decode step (the median of reps),
// all after depth tokens of context, and this machine's memory bandwidth
// on threads threads.
func Bench(m *Model, threads, reps, depth int) (BenchResult, error) {
	pool := cpu.NewPool(threads)
	defer pool.Close()
	f := cpu.NewFast(m.Llama, cpu.DefaultKernels(), pool, 0)
	t := cpu.NewTargetWith(f)
	// A forward of the prompt's size first, not timed, as llama-bench
	// warms up: the timed prefill then finds the buffers a 64-row
	// forward grows (its scratch, the threads' activation layouts)
	// already paged in, as every prompt but a session's first does.
	if err := warmUp(t, 64); err != nil {
		return BenchResult{}, err
	}
	prof, err := engine.ProfileTargetAt(t, depth, 64, 64, BenchSizes, reps)
	if err != nil {
		return BenchResult{}, err
	}
	res := BenchResult{Kernels: f.K.Name, Threads: threads, PrefillTokS: prof.PrefillTokensPerSec,
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

// warmUp runs one forward of n tokens (token 0, n times) and empties t.
func warmUp(t engine.Target, n int) error {
	if _, err := t.Forward(make([]int, n)); err != nil {
		return err
	}
	return t.Truncate(0)
}
