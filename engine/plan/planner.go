// Package plan chooses each round's tree shape, or no draft at all, from
// Dovetail's cost model: the target's measured costs (Profile), the
// draft step's cost and acceptance measured live.
package plan

import (
	"math"
	"sync"
	"time"

	"dovetail/engine/tree"
)

// Planner chooses the draft tree shape, or no speculation, to maximise
// predicted tokens/s with Dovetail's cost model:
//
//	T = (depth·T_D + T_V(γ+1)) / τ(depth, γ)   per token, against T_T plain,
//
// where T_V(n) is the profiled cost of verifying n nodes (the root and γ
// draft nodes), T_D the cost of one draft step, measured live, and τ the
// expected tokens per round, predicted from live acceptance by depth.
// It is safe for concurrent use.
type Planner struct {
	mu      sync.Mutex
	prof    Profile
	k       int
	shapes  []tree.Params
	reached []float64 // decayed count of rounds whose path reached depth d+1
	offered []float64 // decayed count of rounds that offered a node at depth d+1
	draftT  float64   // EMA of seconds per draft step
	// catchT is an EMA of the seconds a drafter takes per committed
	// position it reads when it catches up after rounds without a draft
	// (CatchUpper): the price of a probe grows with the plain steps before
	// it, since the draft reads every one of them first.
	catchT float64
	catchN int
	// scale is how much slower (>1) or faster the target runs in this run
	// than when it was profiled: an EMA of measured over profiled forward
	// times, which every profiled cost is multiplied by. A profile is taken
	// once per machine and model and cached, perhaps while the machine was
	// busy; and a run's steps carry costs (sampling, bookkeeping) the
	// profile does not see.
	scale, scaledAt float64
	// overhead is an EMA of the seconds a round spends outside the
	// target's forward and the draft: emitting tokens, the drafter's
	// bookkeeping, the plan itself. Every round pays it once, a plain
	// step as a speculative round; at small model sizes it is a large
	// part of a step (docs/measurements/speculation.md, "Cold start: a
	// new draft starts behind the first token" and "Predictions of setup
	// against what run measures").
	overhead float64
	overN    int
	rounds   int
	idle     int // rounds since the last speculative one while off
	// The best shape until the next observation: while speculation is off
	// Plan runs every decode step, and scoring every shape would cost a
	// tenth of a small model's step.
	best      tree.Params
	bestS     float64
	bestKnown bool
	// ProbeEvery is how often, while speculation is off, one speculative
	// round runs anyway, so that acceptance stays measured and speculation
	// comes back when it would win; less often when a probe costs more
	// than ProbeShare of the decode time in between (a draft far slower
	// than the target: on the test models a probe costs ten decode steps,
	// and probing every 16 halved decode speed).
	ProbeEvery int
	ProbeShare float64
	// Remembered continuations verified while speculation is off (a
	// Recaller's): decayed counts of their tokens that were tried (the
	// target checked them) and accepted.
	recallTried, recallTaken float64
	// learned, for a planner without a profile, is what the run's own
	// forwards cost.
	learned *costFit
}

// coldRounds are the first speculative rounds, whose draft time counts
// only when it is the fastest yet.
const coldRounds = 4

// decay weighs recent rounds: acceptance drifts with the text.
const decay = 0.98

// New plans from a profile of the target. k is the top-k of every
// candidate shape.
func New(p Profile, k int) *Planner {
	pl := &Planner{prof: p, k: k, ProbeEvery: 16, ProbeShare: 0.05, scale: 1, scaledAt: 1}
	for _, depth := range []int{0, 1, 2, 3, 4, 5, 6, 7} {
		for _, g := range []int{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 63} {
			if _, ok := p.Verify[nearestSize(p, g+1)]; ok && g >= depth+1 {
				pl.shapes = append(pl.shapes, tree.Params{TopK: k, Depth: depth, Tokens: g})
			}
		}
	}
	return pl
}

// NewProvisional plans before the target was profiled, from what
// the run's own forwards cost: the first rounds decode plainly and measure
// T_T, probes measure verification, and a line fitted to those gives
// T_V(n). Nothing is measured before the first token.
func NewProvisional(k int) *Planner {
	pl := &Planner{k: k, ProbeEvery: 16, ProbeShare: 0.05, scale: 1, scaledAt: 1, learned: &costFit{}}
	for _, depth := range []int{0, 1, 2, 3, 4, 5, 6, 7} {
		for _, g := range []int{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 63} {
			if g >= depth+1 {
				pl.shapes = append(pl.shapes, tree.Params{TopK: k, Depth: depth, Tokens: g})
			}
		}
	}
	return pl
}

// Provisional reports whether the planner learns the target's costs from
// the run instead of a profile.
func (pl *Planner) Provisional() bool { return pl.learned != nil }

// nearestSize is the smallest profiled size ≥ n (or the largest).
func nearestSize(p Profile, n int) int {
	best := -1
	for s := range p.Verify {
		if s >= n && (best < 0 || s < best) {
			best = s
		}
	}
	if best < 0 {
		for s := range p.Verify {
			best = max(best, s)
		}
	}
	return best
}

// decodeCost is T_T as the target runs now (0 while unknown).
func (pl *Planner) decodeCost() float64 {
	if pl.learned != nil {
		return pl.learned.at(1)
	}
	return pl.scale * pl.prof.Decode.Seconds()
}

// verifyCost is T_V(n) as the target runs now.
func (pl *Planner) verifyCost(n int) float64 {
	if pl.learned != nil {
		return pl.learned.at(n)
	}
	return pl.scale * pl.profiledVerify(n)
}

// profiledVerify interpolates T_V(n) linearly between profiled sizes.
func (pl *Planner) profiledVerify(n int) float64 {
	lo, hi := -1, -1
	for s := range pl.prof.Verify {
		if s <= n && s > lo {
			lo = s
		}
		if s >= n && (hi < 0 || s < hi) {
			hi = s
		}
	}
	switch {
	case lo < 0:
		return pl.prof.Verify[hi].Seconds()
	case hi < 0 || hi == lo:
		return pl.prof.Verify[lo].Seconds() * float64(n) / float64(lo)
	}
	a, b := pl.prof.Verify[lo].Seconds(), pl.prof.Verify[hi].Seconds()
	return a + (b-a)*float64(n-lo)/float64(hi-lo)
}

// alpha is the estimated probability that a round whose path reached depth
// d−1 also accepts a node at depth d, with a Beta(1, 1) prior.
func (pl *Planner) alpha(d int) float64 {
	if d-1 < len(pl.offered) {
		return (pl.reached[d-1] + 1) / (pl.offered[d-1] + 2)
	}
	// Beyond what was measured: the last measured rate, no better.
	if n := len(pl.offered); n > 0 {
		return pl.alpha(n)
	}
	return 0.5
}

// tau predicts tokens per round for a shape: 1 + Σ_d Π_{i≤d} α_i over the
// depths the tree can cover (a tree of γ nodes is at most γ deep).
func (pl *Planner) tau(p tree.Params) float64 {
	tau, reach := 1.0, 1.0
	for d := 1; d <= min(p.Depth+1, p.Tokens); d++ {
		reach *= pl.alpha(d)
		tau += reach
	}
	return tau
}

// Speedup predicts the speedup of a shape over plain decoding.
func (pl *Planner) Speedup(p tree.Params) float64 {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.speedup(p)
}

func (pl *Planner) speedup(p tree.Params) float64 {
	cost := float64(p.Depth+1)*pl.draftT + pl.verifyCost(p.Tokens+1)
	if cost <= 0 {
		return 0 // nothing measured yet
	}
	return pl.tau(p) * (pl.decodeCost() + pl.overhead) / (cost + pl.overhead)
}

// stepCost is the time of a plain decode step in this run, the round's
// overhead included (0 while unknown).
func (pl *Planner) stepCost() float64 {
	if tt := pl.decodeCost(); tt > 0 {
		return tt + pl.overhead
	}
	return 0
}

// ObserveOverhead records the time one round spent outside the target's
// forward and the draft. One sample is bounded by ten times the average so
// far: a pause of the whole process must not swing the plan.
func (pl *Planner) ObserveOverhead(d time.Duration) {
	s := d.Seconds()
	if s < 0 {
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.overN == 0 {
		pl.overhead = s
	} else {
		pl.overhead = 0.95*pl.overhead + 0.05*min(s, 10*pl.overhead)
	}
	pl.overN++
	if pl.overN%64 == 0 {
		pl.bestKnown = false
	}
}

// bestShape is the shape of highest predicted speedup.
func (pl *Planner) bestShape() (tree.Params, float64) {
	best, bestS := tree.Params{}, 0.0
	for _, s := range pl.shapes {
		if v := pl.speedup(s); v > bestS {
			best, bestS = s, v
		}
	}
	return best, bestS
}

// measureShape is the first speculative round's: one draft step and the
// smallest verification, the cheapest round that measures what a draft
// step costs. Until then the plan cannot know whether the draft pays.
func (pl *Planner) measureShape() tree.Params {
	return tree.Params{TopK: pl.k, Depth: 0, Tokens: 1}
}

// Plan returns the shape to use next and whether to speculate at all.
func (pl *Planner) Plan() (tree.Params, bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.rounds == 0 && pl.stepCost() > 0 {
		pl.idle = 0
		return pl.measureShape(), true
	}
	if !pl.bestKnown {
		pl.best, pl.bestS = pl.bestShape()
		pl.bestKnown = true
	}
	best, bestS := pl.best, pl.bestS
	if bestS > 1 {
		pl.idle = 0
		return best, true
	}
	pl.idle++
	if pl.idle >= pl.probeInterval(best) {
		pl.idle = 0
		return best, true
	}
	return best, false
}

// maxProbeInterval bounds the rounds between probes: a draft that adapts
// gets measured again within seconds.
const maxProbeInterval = 4096

// probeInterval is the rounds between probes with shape p while
// speculation is off: ProbeEvery, or more where a probe (the draft
// catching up on the plain steps before it, drafting and verifying) would
// cost more than ProbeShare of the decode time in between; the most when
// no acceptance could make any shape win, once the draft's cost is known
// beyond its cold first rounds (then a probe measures nothing worth it).
func (pl *Planner) probeInterval(p tree.Params) int {
	if pl.rounds >= coldRounds && !pl.couldWin() {
		return maxProbeInterval
	}
	n := pl.ProbeEvery
	if tt := pl.stepCost(); tt > 0 && pl.ProbeShare > 0 {
		probe := float64(p.Depth+1)*pl.draftT + pl.verifyCost(p.Tokens+1)
		spare := pl.ProbeShare*tt - pl.catchT
		if spare <= 0 {
			return maxProbeInterval
		}
		n = max(n, int(math.Ceil(probe/spare)))
	}
	return min(n, maxProbeInterval)
}

// couldWin reports whether some shape would beat plain decoding if the
// target accepted every node it can (τ = 1 + min(depth+1, γ)).
func (pl *Planner) couldWin() bool {
	step := pl.stepCost()
	for _, p := range pl.shapes {
		cost := float64(p.Depth+1)*pl.draftT + pl.verifyCost(p.Tokens+1) + pl.overhead
		if float64(1+min(p.Depth+1, p.Tokens))*step > cost {
			return true
		}
	}
	return false
}

// ObserveCatchUp records a drafter reading n committed positions it had
// not read, which took d: what a probe costs on top of its round for each
// plain step before it.
func (pl *Planner) ObserveCatchUp(n int, d time.Duration) {
	if n <= 0 || d < 0 {
		return
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	t := d.Seconds() / float64(n)
	if pl.catchN == 0 {
		pl.catchT = t
	} else {
		pl.catchT = 0.9*pl.catchT + 0.1*t
	}
	pl.catchN++
}

// Observe records a speculative round: the shape used, the depth of its
// tree, how deep the accepted path went, and the time spent drafting.
func (pl *Planner) Observe(p tree.Params, treeDepth, accepted int, draft time.Duration) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for len(pl.offered) < treeDepth {
		pl.offered = append(pl.offered, 0)
		pl.reached = append(pl.reached, 0)
	}
	for d := range pl.offered {
		pl.offered[d] *= decay
		pl.reached[d] *= decay
	}
	// Depth d was on offer if the path reached d−1 and the tree went that
	// deep; it was accepted if the path reached d.
	for d := 1; d <= min(treeDepth, accepted+1); d++ {
		pl.offered[d-1]++
		if d <= accepted {
			pl.reached[d-1]++
		}
	}
	steps := float64(p.Depth + 1)
	t := draft.Seconds() / steps
	switch {
	case pl.rounds == 0:
		pl.draftT = t
	case pl.rounds < coldRounds:
		// A draft's first rounds run cold (buffers touched for the first
		// time, threads started): the fastest so far, not their average.
		pl.draftT = min(pl.draftT, t)
	default:
		pl.draftT = 0.9*pl.draftT + 0.1*t
	}
	pl.rounds++
	pl.bestKnown = false
}

// PredictedTokensPerSec is the predicted decode speed under the plan: the
// best shape's, or plain decoding's when no shape beats it or no draft
// round has measured what drafting costs.
func (pl *Planner) PredictedTokensPerSec() float64 {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.stepCost() <= 0 {
		return 0
	}
	if pl.rounds == 0 {
		return 1 / pl.stepCost()
	}
	_, s := pl.bestShape()
	return max(s, 1) / pl.stepCost()
}

// ObserveTarget records one target forward of this run over nodes tokens
// (1: a decode step without a draft) that took d, sampling included, and
// rescales the profile's costs to it.
func (pl *Planner) ObserveTarget(nodes int, d time.Duration) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.learned != nil {
		pl.learned.add(nodes, d.Seconds())
		if pl.learned.at(1); pl.learned.changed {
			pl.bestKnown = false
		}
		return
	}
	prof := pl.prof.Decode.Seconds()
	if nodes > 1 {
		prof = pl.profiledVerify(nodes)
	}
	if prof <= 0 || d <= 0 {
		return
	}
	// One step preempted by the OS must not swing the plan: ratios are
	// bounded, and weighed in slowly.
	r := min(max(d.Seconds()/prof, 0.1), 10)
	pl.scale = 0.95*pl.scale + 0.05*r
	if math.Abs(pl.scale-pl.scaledAt) > 0.05*pl.scaledAt {
		pl.scaledAt = pl.scale
		pl.bestKnown = false
	}
}

// RecallLength is how many tokens of a remembered continuation of n (a
// Recaller's, which costs no drafting) to verify: the k ≤ n of highest
// predicted speedup over plain decoding, 1 + Σ_{i≤k} ρ^i tokens for
// T_V(k+1), or 0 when none beats the speedup bar (1: plain decoding's). ρ
// is the measured share of tried continuation tokens the target accepted
// (Beta(1, 1) prior).
func (pl *Planner) RecallLength(n int, bar float64) int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	rho := (pl.recallTaken + 1) / (pl.recallTried + 2)
	if pl.decodeCost() <= 0 {
		return 0
	}
	best, bestSpeed := 0, bar/pl.decodeCost()
	tau, reach := 1.0, 1.0
	for k := 1; k <= n; k++ {
		reach *= rho
		tau += reach
		if speed := tau / pl.verifyCost(k+1); speed > bestSpeed {
			best, bestSpeed = k, speed
		}
	}
	return best
}

// ObserveRecall records a verified continuation of n tokens whose first
// accepted were taken.
func (pl *Planner) ObserveRecall(n, accepted int) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.recallTried = decay*pl.recallTried + float64(min(accepted+1, n))
	pl.recallTaken = decay*pl.recallTaken + float64(accepted)
}

// Predict is the shape of highest predicted speed for a draft whose
// every depth the target accepts with probability alpha and whose step
// takes draftStep, and that speed in tokens/s: plain decoding's when no
// shape beats it (the plan then turns drafting off). It reads the costs
// only: what setup predicts before anything ran.
func (pl *Planner) Predict(alpha float64, draftStep time.Duration) (tree.Params, float64) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	tt := pl.decodeCost()
	if tt <= 0 {
		return tree.Params{}, 0
	}
	best, bestSpeed := tree.Params{}, 1/tt
	for _, p := range pl.shapes {
		tau, reach := 1.0, 1.0
		for d := 1; d <= min(p.Depth+1, p.Tokens); d++ {
			reach *= alpha
			tau += reach
		}
		cost := float64(p.Depth+1)*draftStep.Seconds() + pl.verifyCost(p.Tokens+1)
		if s := tau / cost; s > bestSpeed {
			best, bestSpeed = p, s
		}
	}
	return best, bestSpeed
}

// AlphaForTau is the per-depth acceptance that gives tau tokens per round
// in a tree depth levels deep: 1 + α + … + α^depth = tau.
func AlphaForTau(tau float64, depth int) float64 {
	lo, hi := 0.0, 1.0
	for range 50 {
		mid := (lo + hi) / 2
		t, r := 1.0, 1.0
		for range depth {
			r *= mid
			t += r
		}
		if t < tau {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// DecodeTokensPerSec is plain decoding's speed as the planner sees the
// target run now (0 while unmeasured): what a speedup is measured against.
func (pl *Planner) DecodeTokensPerSec() float64 {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if c := pl.stepCost(); c > 0 {
		return 1 / c
	}
	return 0
}
