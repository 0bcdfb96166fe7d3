package plan

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"dovetail/engine/tree"
)

// From forwards of several sizes, the fit finds the line they lie on
// through 10% noise; from decode steps alone, a decode step and the
// default slope.
func TestCostFit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	c := &costFit{}
	if c.at(1) != 0 {
		t.Fatal("a cost before any observation")
	}
	for i := range 600 {
		n := []int{1, 1, 1, 4, 8, 17}[i%6]
		c.add(n, (0.010+0.0004*float64(n))*(0.9+0.2*rng.Float64()))
	}
	if a, b := c.at(0), c.at(1)-c.at(0); math.Abs(a-0.010) > 0.001 || math.Abs(b-0.0004) > 0.0001 {
		t.Errorf("fitted T(n) = %.4f + %.5f·n, want 0.0100 + 0.00040·n", a, b)
	}
	d := &costFit{}
	for range 9 {
		d.add(1, 0.02)
	}
	if got := d.at(1); math.Abs(got-0.02) > 1e-9 {
		t.Errorf("T(1) %.4f from decode steps of 0.02", got)
	}
	if got, want := d.at(16), 0.02*(1+defaultVerifySlope*15); math.Abs(got-want) > 1e-9 {
		t.Errorf("T(16) %.4f before any verification, want %.4f", got, want)
	}
	// Skewed steps (six of 10 ms, three of 16 ms) predict their mean, 12
	// ms, not the median; a step the OS preempted (1 s) counts for nothing.
	e := &costFit{}
	for _, s := range []float64{0.010, 0.016, 0.010, 1, 0.010, 0.016, 0.010, 0.010, 0.016, 0.010} {
		e.add(1, s)
	}
	if got := e.at(1); math.Abs(got-0.012) > 1e-9 {
		t.Errorf("T(1) %.4f from skewed steps, want their mean 0.0120", got)
	}
}

// A planner without a profile decodes plainly until it has measured,
// then plans like a profiled one: with cheap verification and a good
// draft it speculates.
func TestProvisionalPlanner(t *testing.T) {
	pl := NewProvisional(10)
	if !pl.Provisional() || pl.PredictedTokensPerSec() != 0 {
		t.Fatal("a provisional planner predicted before measuring")
	}
	if _, on := pl.Plan(); on {
		t.Error("speculating before anything was measured")
	}
	for i := range 64 {
		n := []int{1, 1, 8, 17}[i%4]
		pl.ObserveTarget(n, 10*time.Millisecond+time.Duration(n)*200*time.Microsecond)
	}
	observeRounds(pl, tree.Server, 0.8, 100*time.Microsecond, 200)
	p, on := pl.Plan()
	if !on || p.Depth < 2 {
		t.Errorf("measured cheap verification, α 0.8: plan %+v on=%v", p, on)
	}
	if got := pl.PredictedTokensPerSec(); got < 1/0.0102 {
		t.Errorf("predicted %.1f tokens/s, plain decoding does %.1f", got, 1/0.0102)
	}
}

// Predict prefers drafting only where it pays, and AlphaForTau inverts
// the τ of a chain of acceptances.
func TestPredict(t *testing.T) {
	cheap := profileWith(10*time.Millisecond, func(n int) time.Duration { return 10*time.Millisecond + time.Duration(n)*200*time.Microsecond })
	pl := New(cheap, 10)
	p, speed := pl.Predict(0.8, 100*time.Microsecond)
	if p.Depth < 2 || speed < 2/0.01 {
		t.Errorf("a good cheap draft: %+v at %.1f tokens/s", p, speed)
	}
	if p, speed := pl.Predict(0.8, time.Second); p != (tree.Params{}) || math.Abs(speed-100) > 1e-6 {
		t.Errorf("a draft step of a second: %+v at %.1f tokens/s, want plain decoding's 100", p, speed)
	}
	if a := AlphaForTau(1+0.5+0.25+0.125, 3); math.Abs(a-0.5) > 1e-6 {
		t.Errorf("AlphaForTau = %.4f, want 0.5", a)
	}
}
