package engine_test

import (
	"slices"
	"testing"

	"dovetail/cpu"
	"dovetail/engine"
)

// oracle drafts, as a chain, the tokens a known output continues with:
// right up to node wrongAt, wrong there; nodes from memFrom on are marked
// as recalled from a text memory. It counts Finish calls.
type oracle struct {
	want             []int // prompt, then the output
	n                int   // nodes per chain
	wrongAt, memFrom int
	vocab            int
	finished         int
}

func (o *oracle) Draft(ctx []int, p engine.TreeParams) (*engine.Tree, error) {
	t := &engine.Tree{}
	for i := 0; i < min(o.n, p.Tokens) && len(ctx)+i < len(o.want); i++ {
		tok := o.want[len(ctx)+i]
		if i == o.wrongAt {
			tok = (tok + 1) % o.vocab
		}
		t.Tokens = append(t.Tokens, tok)
		t.Parents = append(t.Parents, i-1)
		t.Depths = append(t.Depths, i+1)
		t.Scores = append(t.Scores, 0)
		t.Recalled = append(t.Recalled, i >= o.memFrom)
	}
	return t, nil
}
func (o *oracle) Accepted([]int, [][]float32) {}
func (o *oracle) Reset()                      {}
func (o *oracle) Finish()                     { o.finished++ }

// OnRound reports every emitted token once, in order, with where it came
// from: the target's own token first in every round, then the accepted
// draft tokens, those the drafter marked as recalled from the memory as
// such; Generate ends the drafter's sequence itself.
func TestOnRoundSources(t *testing.T) {
	m := load(t, "stories260K-f32.gguf")
	defer m.Close()
	target := cpu.NewTarget(m, pool, 0)
	prompt := []int{1, 403, 407, 261, 378}
	plain, _ := generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 60})
	o := &oracle{want: append(slices.Clone(prompt), plain...), n: 5, wrongAt: 4, memFrom: 2, vocab: m.Config.Vocab}

	var got []int
	var sources []engine.Source
	rounds := 0
	var last engine.Round
	req := engine.Request{Prompt: prompt, MaxTokens: 60, Drafter: o, Tree: engine.TreeParams{TopK: 1, Depth: 8, Tokens: 8},
		OnRound: func(r engine.Round) {
			if len(r.Tokens) != len(r.Sources) || len(r.Tokens) == 0 {
				t.Fatalf("round %d: %d tokens, %d sources", rounds, len(r.Tokens), len(r.Sources))
			}
			if r.Sources[0] != engine.FromTarget {
				t.Errorf("round %d starts with a %v token", rounds, r.Sources[0])
			}
			// The oracle's chain: nodes 0-1 drafted, 2-3 recalled, 4 wrong.
			want := []engine.Source{engine.FromTarget, engine.FromDraft, engine.FromDraft, engine.FromMemory, engine.FromMemory}
			if !slices.Equal(r.Sources, want[:len(r.Sources)]) {
				t.Errorf("round %d: sources %v, want a prefix of %v", rounds, r.Sources, want)
			}
			got = append(got, r.Tokens...)
			sources = append(sources, r.Sources...)
			rounds++
			last = r
			last.Tokens, last.Sources = nil, nil
		}}
	out, st := generate(t, target, req)
	if !slices.Equal(got, out) || !slices.Equal(out, plain) {
		t.Fatalf("rounds reported %v\nemitted %v\nplain   %v", got, out, plain)
	}
	if o.finished != 1 {
		t.Errorf("Finish called %d times, want 1", o.finished)
	}
	if rounds < st.Rounds || rounds > st.Rounds+1 {
		t.Errorf("%d rounds reported, %d speculative rounds", rounds, st.Rounds)
	}
	if last.Tau != st.Tau() || last.TokensPerSec <= 0 {
		t.Errorf("last round: τ %.3f (stats %.3f), %.1f tokens/s", last.Tau, st.Tau(), last.TokensPerSec)
	}
	count := map[engine.Source]int{}
	for _, s := range sources {
		count[s]++
	}
	if count[engine.FromDraft] == 0 || count[engine.FromMemory] == 0 || count[engine.FromTarget] != rounds {
		t.Errorf("sources counted %v over %d rounds", count, rounds)
	}
}

// Without a drafter every token is the target's, one per round.
func TestOnRoundPlain(t *testing.T) {
	m := load(t, "stories260K-f32.gguf")
	defer m.Close()
	target := cpu.NewTarget(m, pool, 0)
	n := 0
	out, _ := generate(t, target, engine.Request{Prompt: []int{1, 403}, MaxTokens: 20, OnRound: func(r engine.Round) {
		if len(r.Tokens) != 1 || r.Sources[0] != engine.FromTarget {
			t.Errorf("plain round %v %v", r.Tokens, r.Sources)
		}
		n++
	}})
	if n != len(out) {
		t.Errorf("%d rounds for %d tokens", n, len(out))
	}
}
