package runner

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"dovetail/engine"
	"dovetail/internal/golden"
)

// embedBounds are the bounds on an embedding against llama.cpp's
// llama-embedding: the least cosine similarity and the largest difference
// of one component (the vectors are unit length). Float files differ only
// in the order of float32 sums; quantized ones also where an activation
// lands on the other side of an int8 rounding (see golden.BoundsFor).
// Measured: docs/measurements/embeddings.md; the bounds are a little
// above the worst case there, at every kernel level.
func embedBounds(name string) (minCosine, maxAbs float64) {
	if strings.Contains(name, "-f32-") || strings.Contains(name, "-F16-") {
		return 0.99999, 3e-4
	}
	return 0.9999, 5e-3
}

// Every test model file's embedding of three prompts (one longer than a
// forward batch) is llama.cpp's, token for token and within the bounds.
func TestEmbedMatchesLlamaCpp(t *testing.T) {
	cases, err := golden.EmbedCases()
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 24 {
		t.Fatalf("%d embedding cases, want 24 (8 model files × 3 prompts)", len(cases))
	}
	slots := map[string]*Slot{}
	slot := func(path string) *Slot {
		if s := slots[path]; s != nil {
			return s
		}
		o := options(t)
		o.Draft, o.Plan = DraftChoice{Kind: DraftNone}, false
		slots[path] = start(t, openPath(t, path), o).Slot(0)
		return slots[path]
	}
	// The worst case of float files [0] and of quantized ones [1].
	worstCos, worstAbs := [2]float64{1, 1}, [2]float64{}
	for _, c := range cases {
		s := slot(c.Model)
		t.Run(c.Name, func(t *testing.T) {
			toks := s.r.model.EmbedTokens(c.Prompt)
			if !slices.Equal(toks, c.Tokens) {
				t.Fatalf("tokens %v, llama.cpp %v", toks, c.Tokens)
			}
			got, err := s.Embed(context.Background(), toks)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.Embedding) {
				t.Fatalf("%d dimensions, llama.cpp %d", len(got), len(c.Embedding))
			}
			cos := golden.Cosine(got, c.Embedding)
			abs, _ := golden.Compare(got, c.Embedding)
			minCos, maxAbs := embedBounds(c.Name)
			q := 0
			if minCos < 0.99999 {
				q = 1
			}
			worstCos[q], worstAbs[q] = min(worstCos[q], cos), max(worstAbs[q], abs)
			if cos < minCos || abs > maxAbs {
				t.Errorf("cosine %.7f (want ≥ %g), max abs diff %.2e (want ≤ %g)", cos, minCos, abs, maxAbs)
			}
			t.Logf("cosine %.7f, max abs diff %.2e, norm %.6f", cos, abs, golden.Norm(got))
		})
	}
	t.Logf("worst of float files: cosine %.7f, max abs diff %.2e; of quantized: cosine %.7f, max abs diff %.2e",
		worstCos[0], worstAbs[0], worstCos[1], worstAbs[1])
}

// openPath opens a model file until the test ends.
func openPath(t testing.TB, path string) *Model {
	t.Helper()
	m, err := OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// An embedding may fill the slot's context but not overflow it, and a
// slot that embedded generates as before: embedding shares the slot with
// generation.
func TestEmbedSharesTheSlot(t *testing.T) {
	m := open(t, "")
	o := options(t)
	o.Draft, o.Plan, o.Ctx = DraftChoice{Kind: DraftNone}, false, 80
	r := start(t, m, o)
	want, _ := greedy(t, r, "Lily and Tom", 20)

	full := make([]int, 80)
	full[0] = m.Tok.BOS()
	for i := 1; i < len(full); i++ {
		full[i] = 100 + i
	}
	if v, err := r.Slot(0).Embed(context.Background(), full); err != nil || math.Abs(golden.Norm(v)-1) > 1e-5 {
		t.Fatalf("a whole context: norm %.6f, %v", golden.Norm(v), err)
	}
	if _, err := r.Slot(0).Embed(context.Background(), append(full, 7)); !errors.Is(err, engine.ErrContextFull) {
		t.Errorf("one token past the context: %v, want ErrContextFull", err)
	}
	if _, err := r.Slot(0).Embed(context.Background(), []int{1, m.Config().Vocab}); err == nil {
		t.Error("a token outside the vocabulary was embedded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := r.Slot(0).Embed(ctx, full); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if got, _ := greedy(t, r, "Lily and Tom", 20); !slices.Equal(got, want) {
		t.Errorf("after embedding, generation gave %v, before %v", got, want)
	}
}
