package plan

import (
	"testing"
	"time"

	"dovetail/engine/tree"
)

func profileWith(decode time.Duration, verify func(n int) time.Duration) Profile {
	p := Profile{Decode: decode, Verify: map[int]time.Duration{}}
	for _, n := range []int{1, 2, 4, 8, 16, 32, 64} {
		p.Verify[n] = verify(n)
	}
	return p
}

// observeRounds feeds rounds whose paths accept each depth with
// probability alpha (deterministically: every round reaches the expected
// depth, rounded).
func observeRounds(pl *Planner, p tree.Params, alpha float64, draft time.Duration, n int) {
	for i := 0; i < n; i++ {
		acc, reach := 0, 1.0
		for d := 1; d <= p.Depth+1; d++ {
			reach *= alpha
			if float64(i%100)/100 < reach {
				acc = d
			}
		}
		pl.Observe(p, p.Depth+1, acc, draft)
	}
}

func TestPlannerTurnsSpeculationOnAndOff(t *testing.T) {
	// Cheap verification (T_V(n) ≈ T_T for small n) and a good draft:
	// speculate, deep.
	cheap := profileWith(10*time.Millisecond, func(n int) time.Duration { return 10*time.Millisecond + time.Duration(n)*200*time.Microsecond })
	pl := New(cheap, 10)
	observeRounds(pl, tree.Server, 0.8, 100*time.Microsecond, 200)
	p, on := pl.Plan()
	if !on || p.Depth < 2 {
		t.Errorf("cheap verify, α 0.8: plan %+v on=%v, want deep speculation", p, on)
	}
	if s := pl.Speedup(p); s < 2 {
		t.Errorf("predicted speedup %.2f", s)
	}
	// Verification nearly as dear as γ decode steps: not worth it at α
	// 0.5, though it would be if the target accepted every node.
	dear := profileWith(10*time.Millisecond, func(n int) time.Duration { return time.Duration(n) * 9 * time.Millisecond })
	pl = New(dear, 10)
	pl.ProbeShare = 0
	observeRounds(pl, tree.Server, 0.5, time.Millisecond, 200)
	offRounds := func() int {
		n := 0
		for i := 0; i < 64; i++ {
			if _, on := pl.Plan(); !on {
				n++
			}
		}
		return n
	}
	// Off, but probing every ProbeEvery rounds.
	if got, want := offRounds(), 64-64/pl.ProbeEvery; got != want {
		t.Errorf("dear verify: %d of 64 rounds off, want %d", got, want)
	}
	// A probe (at least T_D + T_V(2) = 19 ms) may take 5% of the decode
	// time between probes (10 ms a step): one every 38 rounds or more.
	pl.ProbeShare = 0.05
	if got := offRounds(); got != 63 {
		t.Errorf("dear verify, probes within 5%%: %d of 64 rounds off, want 63", got)
	}
	if got := pl.PredictedTokensPerSec(); got < 99 || got > 101 {
		t.Errorf("predicted %.1f tokens/s with speculation off, want plain decoding's 100", got)
	}
	// Dearer still, no acceptance makes a round pay: no probe at all.
	dearer := profileWith(10*time.Millisecond, func(n int) time.Duration { return time.Duration(n) * 11 * time.Millisecond })
	pl = New(dearer, 10)
	pl.ProbeShare = 0
	observeRounds(pl, tree.Server, 0.5, time.Millisecond, 200)
	if got := offRounds(); got != 64 {
		t.Errorf("a draft that cannot win: %d of 64 rounds off, want 64", got)
	}
}

// The first speculative round measures the draft as cheaply as a round
// can: one draft step, two nodes verified.
func TestPlannerMeasuresDraftFirst(t *testing.T) {
	prof := profileWith(10*time.Millisecond, func(n int) time.Duration { return 10*time.Millisecond + time.Duration(n)*200*time.Microsecond })
	pl := New(prof, 10)
	if got := pl.PredictedTokensPerSec(); got < 99 || got > 101 {
		t.Errorf("before any draft round: predicted %.1f tokens/s, want plain decoding's 100", got)
	}
	p, on := pl.Plan()
	if want := (tree.Params{TopK: 10, Depth: 0, Tokens: 1}); !on || p != want {
		t.Fatalf("first plan %+v on=%v, want %+v on", p, on, want)
	}
	observeRounds(pl, p, 0.8, 100*time.Microsecond, 1)
	if p, on := pl.Plan(); !on || p.Depth < 1 {
		t.Errorf("after a cheap draft step: plan %+v on=%v, want a deeper tree", p, on)
	}
	// A provisional planner measures the draft once a decode step is
	// known, not before.
	pl = NewProvisional(10)
	if _, on := pl.Plan(); on {
		t.Error("provisional, nothing measured: speculates")
	}
	pl.ObserveTarget(1, 10*time.Millisecond)
	if p, on := pl.Plan(); !on || p.Depth != 0 || p.Tokens != 1 {
		t.Errorf("provisional, a step measured: plan %+v on=%v, want the measuring round", p, on)
	}
}

// A probe's price includes the draft reading the plain steps before it:
// probes come further apart the more a caught-up position costs, and not
// at all while catching up alone costs more than the probe share.
func TestPlannerProbesPayForCatchUp(t *testing.T) {
	dear := profileWith(10*time.Millisecond, func(n int) time.Duration { return time.Duration(n) * 9 * time.Millisecond })
	interval := func(catchUp time.Duration) int {
		pl := New(dear, 10)
		observeRounds(pl, tree.Server, 0.5, time.Millisecond, 200)
		if catchUp > 0 {
			pl.ObserveCatchUp(10, 10*catchUp)
		}
		n := 1
		for ; n <= 2*maxProbeInterval; n++ {
			if _, on := pl.Plan(); on {
				break
			}
		}
		return n
	}
	free, cheap, dear2 := interval(0), interval(200*time.Microsecond), interval(time.Millisecond)
	if !(free < cheap && cheap < maxProbeInterval) {
		t.Errorf("probe every %d rounds without catch-up, %d at 0.2 ms a position: want more, fewer than %d", free, cheap, maxProbeInterval)
	}
	if dear2 != maxProbeInterval {
		t.Errorf("catching up alone costs 10%% of a step: a probe every %d rounds, want %d", dear2, maxProbeInterval)
	}
}

func TestPlannerTracksAcceptance(t *testing.T) {
	prof := profileWith(10*time.Millisecond, func(n int) time.Duration { return 10*time.Millisecond + time.Duration(n)*time.Millisecond })
	pl := New(prof, 10)
	observeRounds(pl, tree.Server, 0.95, 0, 300)
	hi := pl.tau(tree.Server)
	observeRounds(pl, tree.Server, 0.1, 0, 300)
	lo := pl.tau(tree.Server)
	if !(hi > 4 && lo < 1.5) {
		t.Errorf("τ predicted %.2f after α 0.95, %.2f after α 0.1", hi, lo)
	}
}

// The profile is cached per machine and model; a run on a machine busier
// (or quieter) than when it was profiled must plan and predict with the
// speed it sees.
func TestPlannerScalesProfileToLiveSpeed(t *testing.T) {
	prof := profileWith(10*time.Millisecond, func(n int) time.Duration { return 10*time.Millisecond + time.Duration(n)*time.Millisecond })
	pl := New(prof, 10)
	pl.ProbeShare = 0
	before := pl.PredictedTokensPerSec()
	// Steps take twice the profiled time: every target cost doubles.
	for i := 0; i < 200; i++ {
		pl.ObserveTarget(1, 20*time.Millisecond)
	}
	if got := pl.PredictedTokensPerSec() / before; got < 0.49 || got > 0.51 {
		t.Errorf("steps at twice the profiled time: prediction scaled by %.3f, want 0.5", got)
	}
	// A draft step of 5 ms with α = 0.6: against the profile's 10 ms step
	// speculation loses (one draft node costs 5 + 12 ms for τ 1.6), against
	// the 20 ms the target takes now it wins (5 + 24 ms for 32 ms of steps).
	observeRounds(pl, tree.Params{TopK: 10, Depth: 1, Tokens: 2}, 0.6, 5*time.Millisecond, 200)
	if _, on := pl.Plan(); !on {
		t.Errorf("target at twice its profiled cost, draft steps 5 ms, α 0.6: speculation off")
	}
	fresh := New(prof, 10)
	fresh.ProbeShare = 0
	observeRounds(fresh, tree.Params{TopK: 10, Depth: 1, Tokens: 2}, 0.6, 5*time.Millisecond, 200)
	if _, on := fresh.Plan(); on {
		t.Errorf("target at its profiled cost, draft steps 5 ms, α 0.6: speculation on")
	}
	// One preempted step moves nothing much.
	pl.ObserveTarget(1, 10*time.Second)
	if got := pl.PredictedTokensPerSec(); got < 30 {
		t.Errorf("after one 10 s step: predicted %.1f tokens/s", got)
	}
}

// A remembered continuation is verified, as far as it pays, while it is
// predicted to beat plain decoding: cheap verification and a continuation
// the target mostly accepts; not once the target keeps refusing it, nor
// when verifying is dear; only its start when verifying grows dear fast.
func TestPlannerRecallLength(t *testing.T) {
	cheap := profileWith(10*time.Millisecond, func(n int) time.Duration { return 10*time.Millisecond + time.Duration(n)*500*time.Microsecond })
	pl := New(cheap, 10)
	if k := pl.RecallLength(8, 1); k < 2 {
		t.Errorf("cheap verify, no history (ρ ½): verify %d of 8 tokens", k)
	}
	for range 200 {
		pl.ObserveRecall(8, 0) // refused at once
	}
	if k := pl.RecallLength(8, 1); k != 0 {
		t.Errorf("cheap verify, every continuation refused: verify %d of 8", k)
	}
	for range 400 {
		pl.ObserveRecall(8, 8)
	}
	if k := pl.RecallLength(8, 1); k != 8 {
		t.Errorf("cheap verify, every continuation accepted: verify %d of 8", k)
	}
	// 9 tokens for T_V(9) = 14.5 ms: a speedup of 6.2, not 7.
	if k := pl.RecallLength(8, 7); k != 0 {
		t.Errorf("against a draft predicted 7× faster than plain decoding: verify %d of 8", k)
	}
	dear := profileWith(10*time.Millisecond, func(n int) time.Duration { return time.Duration(n) * 20 * time.Millisecond })
	pl = New(dear, 10)
	for range 400 {
		pl.ObserveRecall(8, 8)
	}
	// k+1 tokens at best for T_V(k+1) = 20(k+1) ms against 10 ms a token.
	if k := pl.RecallLength(8, 1); k != 0 {
		t.Errorf("verification dearer than the tokens it can win: verify %d of 8", k)
	}
	// T_V(n) flat up to 2 nodes, then steep: only the first token pays.
	kink := Profile{Decode: 10 * time.Millisecond, Verify: map[int]time.Duration{1: 10 * time.Millisecond,
		2: 11 * time.Millisecond, 4: 80 * time.Millisecond, 8: 160 * time.Millisecond, 16: 320 * time.Millisecond}}
	pl = New(kink, 10)
	if k := pl.RecallLength(8, 1); k != 1 {
		t.Errorf("verify flat to 2 nodes, then dear: verify %d of 8, want 1", k)
	}
}

// A round's time outside the forward and the draft counts once per round:
// plain decoding's predicted speed includes it, and a speculative round,
// paying it once for τ tokens, gains against plain decoding by it.
func TestPlannerRoundOverhead(t *testing.T) {
	prof := profileWith(time.Millisecond, func(n int) time.Duration { return time.Millisecond + time.Duration(n)*100*time.Microsecond })
	pl := New(prof, 10)
	pl.ProbeShare = 0
	if got := pl.DecodeTokensPerSec(); got < 999 || got > 1001 {
		t.Fatalf("without overhead: %.1f tokens/s, want 1000", got)
	}
	p := tree.Params{TopK: 10, Depth: 1, Tokens: 2}
	observeRounds(pl, p, 0.5, 100*time.Microsecond, 100)
	before := pl.Speedup(p)
	for range 200 {
		pl.ObserveOverhead(time.Millisecond)
	}
	if got := pl.DecodeTokensPerSec(); got < 499 || got > 501 {
		t.Errorf("with 1 ms a round besides: %.1f tokens/s, want 500", got)
	}
	if after := pl.Speedup(p); after <= before {
		t.Errorf("speedup %.3f with the overhead, %.3f without: want higher", after, before)
	}
	// A pause of the whole process weighs in bounded.
	pl.ObserveOverhead(10 * time.Second)
	if got := pl.DecodeTokensPerSec(); got < 250 {
		t.Errorf("one 10 s pause brought the prediction to %.1f tokens/s", got)
	}
}

// A draft's first rounds run cold: the planner keeps the fastest of them,
// not a cold first one, and averages from then on.
func TestPlannerColdDraftRounds(t *testing.T) {
	prof := profileWith(time.Millisecond, func(n int) time.Duration { return time.Millisecond })
	pl := New(prof, 10)
	p := tree.Params{TopK: 10, Depth: 0, Tokens: 1}
	pl.Observe(p, 1, 1, 40*time.Millisecond) // cold
	pl.Observe(p, 1, 1, 100*time.Microsecond)
	if pl.draftT > 101e-6 {
		t.Fatalf("after a cold round and a warm one: %.1f µs a draft step", pl.draftT*1e6)
	}
	for range 50 {
		pl.Observe(p, 1, 1, 200*time.Microsecond)
	}
	if pl.draftT < 190e-6 {
		t.Errorf("after warm rounds of 200 µs: %.1f µs", pl.draftT*1e6)
	}
}
