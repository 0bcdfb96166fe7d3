package engine_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"dovetail/cpu"
	"dovetail/engine"
	"dovetail/engine/drafters"
	"dovetail/engine/enginetest"
	"dovetail/engine/plan"
	"dovetail/engine/tree"
	"dovetail/internal/golden"
)

// garbage proposes random trees: speculation must stay exact, only slower.
type garbage struct{ rng *rand.Rand }

func (g *garbage) Draft(ctx []int, p tree.Params) (*tree.Tree, error) {
	tr := &tree.Tree{}
	for range p.Tokens {
		parent, depth := -1, 1
		if n := len(tr.Tokens); n > 0 && g.rng.IntN(2) == 0 {
			parent = g.rng.IntN(n)
			depth = tr.Depths[parent] + 1
		}
		tok := g.rng.IntN(512)
		dup := false
		for j := range tr.Tokens {
			dup = dup || (tr.Parents[j] == parent && tr.Tokens[j] == tok)
		}
		if dup {
			continue
		}
		tr.Tokens = append(tr.Tokens, tok)
		tr.Parents = append(tr.Parents, parent)
		tr.Depths = append(tr.Depths, depth)
		tr.Scores = append(tr.Scores, 0)
	}
	return tr, nil
}
func (g *garbage) Accepted([]int, [][]float32) {}
func (g *garbage) Reset()                      {}
func (g *garbage) Finish()                     {}

// twin names a smaller file of the same model to draft with.
func twin(name string) string {
	if strings.HasPrefix(name, "stories260K") {
		return "stories260K-Q4_0-mixed.gguf"
	}
	return "tinystories656K-Q4_0.gguf"
}

// Greedy speculative output equals plain greedy decoding, token for token:
// every test model × both prompts × every drafter × several tree shapes,
// γ = 1 and a γ larger than the tree can fill among them.
func TestSpeculativeGreedyEqualsPlain(t *testing.T) {
	cases, err := golden.Cases()
	if err != nil {
		t.Fatal(err)
	}
	shapes := []tree.Params{tree.Server, {TopK: 1, Depth: 0, Tokens: 1}}
	// The reference forward runs tree nodes one by one, so the other
	// shapes run on one file of each model.
	extra := []tree.Params{tree.Laptop, {TopK: 3, Depth: 2, Tokens: 60}}
	for _, gc := range cases {
		name := filepath.Base(gc.Model)
		m := enginetest.Load(t, name)
		dm := enginetest.Load(t, twin(name))
		target := cpu.NewTarget(m, enginetest.Pool, 0)
		plain, _ := enginetest.Generate(t, target, engine.Request{Prompt: gc.PromptTokens, MaxTokens: 40})
		drafters := map[string]engine.Drafter{
			"ngram":   &drafters.Ngram{},
			"model":   drafters.NewModel(cpu.NewTarget(dm, enginetest.Pool, 0)),
			"garbage": &garbage{rng: rand.New(rand.NewPCG(1, 2))},
		}
		for dname, d := range drafters {
			ps := shapes
			if strings.Contains(gc.Name, "-f32-") {
				ps = append(ps, extra...)
			}
			for _, p := range ps {
				got, st := enginetest.Generate(t, target, engine.Request{Prompt: gc.PromptTokens, MaxTokens: 40, Drafter: d, Tree: p})
				if !slices.Equal(got, plain) {
					t.Errorf("%s, %s drafter, %+v: speculative output differs from plain greedy\n got %v\nwant %v", gc.Name, dname, p, got, plain)
				}
				if st.Rounds == 0 || st.Tau() < 1 {
					t.Errorf("%s, %s drafter: %d rounds, τ %.2f", gc.Name, dname, st.Rounds, st.Tau())
				}
			}
		}
		m.Close()
		dm.Close()
	}
}

// Sampled output is the very text plain sampling gives with the same seed,
// whatever the drafter and tree: the target draws each position's token as
// plain decoding does, and the tree only decides how many it checks at once.
func TestSpeculativeSamplingEqualsPlainWithSeed(t *testing.T) {
	m := enginetest.Load(t, "stories260K-f32.gguf")
	defer m.Close()
	dm := enginetest.Load(t, "stories260K-Q8_0-mixed.gguf")
	defer dm.Close()
	target := cpu.NewTarget(m, enginetest.Pool, 0)
	prompt := []int{1, 317, 269, 274, 287}
	for _, params := range []engine.SamplerParams{{Temperature: 1, Seed: 3}, {Temperature: 0.8, TopP: 0.9, TopK: 40, Seed: 4}} {
		plain, _ := enginetest.Generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 60, Sampler: params})
		drafters := map[string]engine.Drafter{
			"model":   drafters.NewModel(cpu.NewTarget(dm, enginetest.Pool, 0)),
			"garbage": &garbage{rng: rand.New(rand.NewPCG(1, 2))},
		}
		for dname, d := range drafters {
			for _, p := range []tree.Params{tree.Server, {TopK: 3, Depth: 2, Tokens: 6}} {
				got, st := enginetest.Generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 60, Sampler: params, Drafter: d, Tree: p})
				if !slices.Equal(got, plain) {
					t.Errorf("%+v, %s drafter, %+v: speculative output differs from plain sampling\n got %v\nwant %v", params, dname, p, got, plain)
				}
				if dname == "model" && st.Tau() <= 1 {
					t.Errorf("%+v, model drafter, %+v: τ %.2f, nothing accepted", params, p, st.Tau())
				}
			}
		}
	}
}

// Greedy output also equals llama.cpp's, with drafting on.
func TestSpeculativeMatchesLlamaCpp(t *testing.T) {
	gc, err := golden.Load(filepath.Join(golden.Root(), "golden", "greedy", "stories260K-f32-p1"))
	if err != nil {
		t.Fatal(err)
	}
	m := enginetest.Load(t, "stories260K-f32.gguf")
	defer m.Close()
	dm := enginetest.Load(t, "stories260K-Q8_0-mixed.gguf")
	defer dm.Close()
	got, st := enginetest.Generate(t, cpu.NewTarget(m, enginetest.Pool, 0), engine.Request{Prompt: gc.PromptTokens, MaxTokens: len(gc.Steps),
		Drafter: drafters.NewModel(cpu.NewTarget(dm, enginetest.Pool, 0)), Tree: tree.Server})
	if !slices.Equal(got, gc.Tokens()) {
		t.Errorf("got %v\nwant %v", got, gc.Tokens())
	}
	// A Q8_0 twin predicts the f32 model well: most rounds accept something.
	if st.Tau() < 2 {
		t.Errorf("τ = %.2f with a Q8_0 twin as draft, want ≥ 2", st.Tau())
	}
	t.Logf("τ %.2f over %d rounds; acceptance by depth %v", st.Tau(), st.Rounds, fmtFloats(st.AcceptanceByDepth()))
}

func fmtFloats(x []float64) string {
	s := make([]string, len(x))
	for i, v := range x {
		s[i] = fmt.Sprintf("%.2f", v)
	}
	return strings.Join(s, " ")
}

// With the planner switching shapes and speculation on and off, greedy
// output still equals plain decoding.
func TestPlannerKeepsGreedyOutput(t *testing.T) {
	m := enginetest.Load(t, "stories260K-f32.gguf")
	defer m.Close()
	dm := enginetest.Load(t, "stories260K-Q4_0-mixed.gguf")
	defer dm.Close()
	target := cpu.NewTarget(m, enginetest.Pool, 0)
	prof, err := engine.ProfileTarget(target, 16, 16, []int{1, 2, 4, 8, 16, 32, 64}, 3)
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int{1, 403, 407, 261, 380}
	plain, _ := enginetest.Generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 60})
	for _, probe := range []int{1, 3, 1 << 30} {
		pl := plan.New(prof, 10)
		pl.ProbeEvery = probe
		for _, d := range []engine.Drafter{drafters.NewModel(cpu.NewTarget(dm, enginetest.Pool, 0)), &drafters.Ngram{}} {
			got, st := enginetest.Generate(t, target, engine.Request{Prompt: prompt, MaxTokens: 60, Drafter: d, Tree: tree.Server, Planner: pl})
			if !slices.Equal(got, plain) {
				t.Errorf("probe %d, %T: output differs with the planner\n got %v\nwant %v", probe, d, got, plain)
			}
			t.Logf("probe %d, %T: %d rounds, %d plain steps, τ %.2f", probe, d, st.Rounds, st.PlainSteps, st.Tau())
		}
	}
}
