package tree

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// logitsFor makes logits whose softmax is proportional to weights.
func logitsFor(weights ...float64) []float32 {
	l := make([]float32, len(weights))
	for i, w := range weights {
		l[i] = float32(math.Log(w))
	}
	return l
}

// A hand-checked tree over a 4-token vocabulary. The draft's distribution
// depends only on the parent's token:
//
//	root → 0: .6, 1: .3, 2: .1
//	after 0 → 3: .9 ...; after 1 → 2: .5, 3: .5 ...
func TestBuildTreeByHand(t *testing.T) {
	next := map[int][]float32{
		0: logitsFor(0.01, 0.04, 0.05, 0.9),
		1: logitsFor(0.0, 0.0, 0.5, 0.5),
		3: logitsFor(0.7, 0.1, 0.1, 0.1),
	}
	root := logitsFor(0.6, 0.3, 0.1, 0.0)
	var calls [][]int
	expand := func(tokens, parents []int) ([][]float32, error) {
		calls = append(calls, slices.Clone(parents))
		out := make([][]float32, len(tokens))
		for i, tok := range tokens {
			out[i] = next[tok]
		}
		return out, nil
	}
	tr, err := Build(Params{TopK: 2, Depth: 2, Tokens: 4}, root, expand)
	if err != nil {
		t.Fatal(err)
	}
	// Candidates: 0 (.6), 1 (.3); 0→3 (.54), 0→2 (.03), 1→2 (.15), 1→3 (.15);
	// frontier after depth 1: 0→3, then 1→2 (tie with 1→3, created first);
	// 0→3→0 (.378), 0→3→1 (.054), ...
	// Best 4: 0 (.6), 0→3 (.54), 0→3→0 (.378), 1 (.3).
	wantTokens := []int{0, 1, 3, 0}
	wantParents := []int{-1, -1, 0, 2}
	if !slices.Equal(tr.Tokens, wantTokens) || !slices.Equal(tr.Parents, wantParents) {
		t.Errorf("tree tokens %v parents %v, want %v %v", tr.Tokens, tr.Parents, wantTokens, wantParents)
	}
	if err := tr.Check(); err != nil {
		t.Error(err)
	}
	// The second expansion's parents index the first's pending nodes. Of
	// the frontier 0→3 (.54) and 1→2 (.15), 1→2 is not expanded: five
	// candidates score at least .15, so nothing below it is among the best 4.
	if len(calls) != 2 || !slices.Equal(calls[0], []int{-1, -1}) || !slices.Equal(calls[1], []int{0}) {
		t.Errorf("expand parents %v", calls)
	}
}

func TestBuildTreeProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	vocab := 50
	randLogits := func() []float32 {
		l := make([]float32, vocab)
		for i := range l {
			l[i] = float32(rng.NormFloat64() * 3)
		}
		return l
	}
	for trial := 0; trial < 200; trial++ {
		p := Params{TopK: 1 + rng.IntN(6), Depth: rng.IntN(6), Tokens: 1 + rng.IntN(40)}
		pending := 0
		tr, err := Build(p, randLogits(), func(tokens, parents []int) ([][]float32, error) {
			for _, par := range parents {
				if par < -1 || par >= pending {
					t.Fatalf("expand parent %d with %d pending", par, pending)
				}
			}
			pending += len(tokens)
			out := make([][]float32, len(tokens))
			for i := range out {
				out[i] = randLogits()
			}
			return out, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := tr.Check(); err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		if tr.Len() > p.Tokens || tr.Len() == 0 {
			t.Fatalf("%+v: %d nodes", p, tr.Len())
		}
		for i, par := range tr.Parents {
			if tr.Depths[i] > p.Depth+1 {
				t.Fatalf("%+v: node %d at depth %d", p, i, tr.Depths[i])
			}
			if par >= 0 && tr.Scores[i] > tr.Scores[par] {
				t.Fatalf("%+v: node %d scores above its parent", p, i)
			}
		}
		// Most likely first: the kept root children include the best one.
		if p.Tokens == 1 && tr.Parents[0] != -1 {
			t.Fatalf("γ=1 kept a non-root node")
		}
	}
}

// Pruning hopeless frontier nodes must give the very tree that expanding
// them all gives, with ties (coarse logits) and sharp distributions.
func TestBuildTreePruningKeepsTheTree(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const vocab = 40
	saved := 0
	for trial := 0; trial < 400; trial++ {
		p := Params{TopK: 1 + rng.IntN(10), Depth: rng.IntN(8), Tokens: 1 + rng.IntN(40)}
		scale := []float64{0.5, 3, 8}[trial%3]
		coarse := trial%4 == 0
		// The logits of a node depend only on its path: both builds see
		// the same model, whatever order they expand in.
		logitsOf := func(path []int) []float32 {
			h := uint64(1469598103934665603) + uint64(trial)
			for _, tok := range path {
				h = (h ^ uint64(tok+1)) * 1099511628211
			}
			r := rand.New(rand.NewPCG(h, 9))
			l := make([]float32, vocab)
			for i := range l {
				v := r.NormFloat64() * scale
				if coarse {
					v = math.Round(v)
				}
				l[i] = float32(v)
			}
			return l
		}
		run := func(prune bool) (*Tree, int) {
			var paths [][]int // of pending nodes
			calls := 0
			tr, err := buildTree(p, rankLogits(logitsOf(nil), p.TopK), rankWith(func(tokens, parents []int) ([][]float32, error) {
				out := make([][]float32, len(tokens))
				for i, tok := range tokens {
					var path []int
					if parents[i] >= 0 {
						path = slices.Clone(paths[parents[i]])
					}
					path = append(path, tok)
					paths = append(paths, path)
					out[i] = logitsOf(path)
				}
				calls += len(tokens)
				return out, nil
			}), prune)
			if err != nil {
				t.Fatal(err)
			}
			return tr, calls
		}
		all, nAll := run(false)
		got, nGot := run(true)
		if !slices.Equal(got.Tokens, all.Tokens) || !slices.Equal(got.Parents, all.Parents) || !slices.Equal(got.Scores, all.Scores) {
			t.Fatalf("trial %d %+v: pruned tree %v %v, want %v %v", trial, p, got.Tokens, got.Parents, all.Tokens, all.Parents)
		}
		if nGot > nAll {
			t.Fatalf("trial %d: pruning expanded %d nodes, more than %d", trial, nGot, nAll)
		}
		saved += nAll - nGot
	}
	if saved == 0 {
		t.Error("pruning never saved an expansion")
	}
}
