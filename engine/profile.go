package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"dovetail/engine/plan"
)

// ProfileTarget measures t: prefill of prompt tokens, decode of steps
// tokens, and verification of trees of each size in sizes (a chain: the
// cost of a forward depends on the node count, not the tree's shape),
// each the median of reps runs after the prompt. Tokens are random.
func ProfileTarget(t Target, prompt, steps int, sizes []int, reps int) (plan.Profile, error) {
	return ProfileTargetAt(t, 0, prompt, steps, sizes, reps)
}

// depthChunk is how many tokens of context FillContext fills a forward.
const depthChunk = 256

// FillContext extends t by n random tokens (from rng), depthChunk a
// forward: the context a profile or a benchmark measures after.
func FillContext(t Target, n int, rng *rand.Rand) error {
	for d := 0; d < n; d += depthChunk {
		toks := make([]int, min(depthChunk, n-d))
		for i := range toks {
			toks[i] = rng.IntN(t.Vocab())
		}
		if _, err := t.Forward(toks); err != nil {
			return err
		}
	}
	return nil
}

// ProfileTargetAt is ProfileTarget after depth tokens of context, filled
// first and not timed: attention's share grows with the context, and a
// conversation's steps run deep in it.
func ProfileTargetAt(t Target, depth, prompt, steps int, sizes []int, reps int) (plan.Profile, error) {
	return profileTarget(t, depth, prompt, steps, sizes, reps, 0)
}

// ProfileTargetWithin is ProfileTarget that starts no new round of its
// reps once within has passed and minRounds are done: on a large model a
// round of every size takes seconds, and a shared host's hiccups, which
// the median of five rounds is there for, are milliseconds.
func ProfileTargetWithin(t Target, prompt, steps int, sizes []int, reps int, within time.Duration) (plan.Profile, error) {
	return profileTarget(t, 0, prompt, steps, sizes, reps, within)
}

// minRounds is how many rounds ProfileTargetWithin runs whatever they take.
const minRounds = 3

func profileTarget(t Target, depth, prompt, steps int, sizes []int, reps int, within time.Duration) (plan.Profile, error) {
	p := plan.Profile{Verify: map[int]time.Duration{}}
	if reps < 1 || steps < 1 || prompt < 1 || depth < 0 {
		return p, fmt.Errorf("profile needs at least one prompt token, decode step and repetition, and a depth of 0 or more (got %d, %d, %d, %d)", prompt, steps, reps, depth)
	}
	need := prompt + steps
	for _, n := range sizes {
		need = max(need, prompt+n)
	}
	if need += depth; need > t.Context() {
		return p, fmt.Errorf("profile needs %d positions, the context holds %d", need, t.Context())
	}
	rng := rand.New(rand.NewPCG(1, 2))
	toks := func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = rng.IntN(t.Vocab())
		}
		return s
	}
	// Warm up: page in the weights.
	if err := t.Truncate(0); err != nil {
		return p, err
	}
	if _, err := t.Forward(toks(min(8, prompt))); err != nil {
		return p, err
	}
	t.Truncate(0)
	if err := FillContext(t, depth, rng); err != nil {
		return p, err
	}
	start := time.Now()
	if _, err := t.Forward(toks(prompt)); err != nil {
		return p, err
	}
	p.PrefillTokensPerSec = float64(prompt) / time.Since(start).Seconds()
	start = time.Now()
	for _, tok := range toks(steps) {
		if _, err := t.Forward([]int{tok}); err != nil {
			return p, err
		}
	}
	p.DecodeTokensPerSec = float64(steps) / time.Since(start).Seconds()
	// T_T and every T_V(n) are measured in the same rounds, one of each per
	// round, so that the machine slowing down or speeding up over the run
	// (a shared host) moves them together and their ratios stay right.
	var dec []time.Duration
	ver := make(map[int][]time.Duration, len(sizes))
	chain := make([]int, need) // a chain of n nodes is chain[:n]
	for i := range chain {
		chain[i] = i - 1
	}
	begin := time.Now()
	for r := 0; r < reps; r++ {
		if within > 0 && r >= minRounds && time.Since(begin) > within {
			break
		}
		if err := t.Truncate(depth + prompt); err != nil {
			return p, err
		}
		tk := toks(1)
		start := time.Now()
		if _, err := t.Forward(tk); err != nil {
			return p, err
		}
		dec = append(dec, time.Since(start))
		for _, n := range sizes {
			if err := t.Truncate(depth + prompt); err != nil {
				return p, err
			}
			tk := toks(n)
			start := time.Now()
			if _, _, err := t.Extend(tk, chain[:n]); err != nil {
				return p, err
			}
			ver[n] = append(ver[n], time.Since(start))
		}
	}
	median := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	p.Decode = median(dec)
	for _, n := range sizes {
		p.Verify[n] = median(ver[n])
	}
	return p, t.Truncate(0)
}
