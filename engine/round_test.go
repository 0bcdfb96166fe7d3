package engine_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"dovetail/cpu"
	"dovetail/engine"
	"dovetail/engine/drafters"
	"dovetail/engine/enginetest"
	"dovetail/engine/tree"
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

func (o *oracle) Draft(ctx []int, p tree.Params) (*tree.Tree, error) {
	t := &tree.Tree{}
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
	m := enginetest.Load(t, "stories260K-f32.gguf")
	defer m.Close()
	target := cpu.NewTarget(m, enginetest.Pool, 0)
	prompt := []int{1, 403, 407, 261, 378}
	plain, _ := enginetest.Generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 60})
	o := &oracle{want: append(slices.Clone(prompt), plain...), n: 5, wrongAt: 4, memFrom: 2, vocab: m.Config.Vocab}

	var got []int
	var sources []engine.Source
	rounds := 0
	var last engine.Round
	req := engine.Request{Prompt: prompt, MaxTokens: 60, Drafter: o, Tree: tree.Params{TopK: 1, Depth: 8, Tokens: 8},
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
	out, st := enginetest.Generate(t, target, req)
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
	m := enginetest.Load(t, "stories260K-f32.gguf")
	defer m.Close()
	target := cpu.NewTarget(m, enginetest.Pool, 0)
	n := 0
	out, _ := enginetest.Generate(t, target, engine.Request{Prompt: []int{1, 403}, MaxTokens: 20, OnRound: func(r engine.Round) {
		if len(r.Tokens) != 1 || r.Sources[0] != engine.FromTarget {
			t.Errorf("plain round %v %v", r.Tokens, r.Sources)
		}
		n++
	}})
	if n != len(out) {
		t.Errorf("%d rounds for %d tokens", n, len(out))
	}
}

// Every emitted token's logprob is the target's log softmax at its
// position, with or without a drafter, greedy or sampled: the same numbers
// plain decoding reports, and the ones a fresh forward over the text
// gives.
func TestLogprobsWithSpeculation(t *testing.T) {
	m := enginetest.Load(t, "stories260K-f32.gguf")
	defer m.Close()
	target := cpu.NewTarget(m, enginetest.Pool, 0)
	prompt := []int{1, 403, 407, 261, 378}
	for _, sp := range []engine.SamplerParams{{}, {Temperature: 0.9, TopK: 40, TopP: 0.95, Seed: 7}} {
		var plain []engine.Logprob
		out, _ := enginetest.Generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 40, Sampler: sp, TopLogprobs: 3,
			OnLogprob: func(lp engine.Logprob) { plain = append(plain, lp) }})
		if len(plain) != len(out) {
			t.Fatalf("%d logprobs for %d tokens", len(plain), len(out))
		}
		for _, d := range []engine.Drafter{&garbage{rng: rand.New(rand.NewPCG(1, 2))}, &drafters.Ngram{}} {
			var spec []engine.Logprob
			out2, st := enginetest.Generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 40, Sampler: sp, TopLogprobs: 3,
				Drafter: d, Tree: tree.Laptop, OnLogprob: func(lp engine.Logprob) { spec = append(spec, lp) }})
			if !slices.Equal(out, out2) || len(spec) != len(plain) || st.Rounds == 0 {
				t.Fatalf("%T: %d tokens, %d logprobs, %d rounds", d, len(out2), len(spec), st.Rounds)
			}
			for i := range plain {
				if spec[i].Token != out[i] || math.Abs(spec[i].Logprob-plain[i].Logprob) > 2e-3 || len(spec[i].Top) != 3 ||
					spec[i].Top[0].Token != plain[i].Top[0].Token {
					t.Fatalf("%T, token %d: %+v, plain %+v", d, i, spec[i], plain[i])
				}
			}
		}
		// A fresh forward over prompt and output: log softmax at each.
		ref := cpu.NewTarget(m, enginetest.Pool, 0)
		for i, tok := range out {
			ctx := append(slices.Clone(prompt), out[:i]...)
			ref.Truncate(0)
			logits, err := ref.Forward(ctx)
			if err != nil {
				t.Fatal(err)
			}
			mx := slices.Max(logits)
			var sum float64
			for _, v := range logits {
				sum += math.Exp(float64(v - mx))
			}
			want := float64(logits[tok]-mx) - math.Log(sum)
			if math.Abs(plain[i].Logprob-want) > 2e-3 || plain[i].Logprob > 0 {
				t.Fatalf("token %d: logprob %.5f, log softmax %.5f", i, plain[i].Logprob, want)
			}
		}
	}
}
