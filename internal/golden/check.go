package golden

import (
	"slices"
	"strings"
	"testing"

	"dovetail/models"
)

// Bounds on the relative error against llama.cpp (largest difference over
// the largest magnitude of the vector). The reference performs llama.cpp's
// arithmetic — f16 KV cache, q and attention weights rounded to f16,
// activations quantized to Q8_0 for Q8_0/Q4_0 weights — and matches it to
// about 1e-7 until one value lands differently on an f16 or int8 rounding
// boundary because the two sum float32 dot products in a different order.
// Such a flip then persists in the KV cache. The bounds below are a little
// above what was measured on every file; the first position, where no flip
// has happened yet, is held to 1e-5, and the median over all positions
// shows that flips are rare. NearTie, where set, replaces the package's
// near tie for quantized files.
type Bounds struct{ First, Logits, Hidden, Median, NearTie float64 }

func BoundsFor(name string) Bounds {
	if strings.Contains(name, "-f32-") || strings.Contains(name, "-F16-") {
		return Bounds{First: 1e-5, Logits: 1.5e-3, Hidden: 2.5e-2, Median: 1e-3}
	}
	// llama.cpp groups prompt rows for Q4_0 weights (runtime repacking), so
	// int8 rounding flips come sooner.
	return Bounds{First: 2e-3, Logits: 3e-2, Hidden: 3e-2, Median: 2e-2}
}

// nearTie is the top-2 logit gap below which a quantized file may pick the
// other token; float files must match exactly.
const NearTie = 0.15

func Argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// Runner runs a model one token at a time, reporting logits and the final
// normed hidden state: the reference, or a Target at some kernel level.
type Runner func(tok int) (logits, hidden []float32, err error)

// Check compares a runner with llama.cpp on every golden case.
func Check(t *testing.T, newRunner func(*models.Llama) Runner) {
	CheckBounds(t, newRunner, BoundsFor)
}

// CheckBounds is Check with the bounds of each case from boundsOf.
func CheckBounds(t *testing.T, newRunner func(*models.Llama) Runner, boundsOf func(string) Bounds) {
	cases, err := Cases()
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) != 16 {
		t.Fatalf("%d golden cases, want 16 (8 model files × 2 prompts)", len(cases))
	}
	for _, gc := range cases {
		t.Run(gc.Name, func(t *testing.T) {
			m, err := models.LoadLlama(gc.Model)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			run := newRunner(m)
			b := boundsOf(gc.Name)
			quantized, nearTie := b.First > 1e-5, NearTie
			if b.NearTie > 0 {
				nearTie = b.NearTie
			}
			var worstLogit, worstHidden float64
			var rels []float64
			check := func(what string, pos int, got, want []float32, worst *float64, tol float64) {
				abs, rel := Compare(got, want)
				rels = append(rels, rel)
				*worst = max(*worst, rel)
				if pos == 0 {
					tol = b.First
				}
				if rel > tol {
					t.Errorf("%s at position %d: max abs error %.3g, relative %.3g > %.1e", what, pos, abs, rel, tol)
				}
			}
			var logits, hidden []float32
			for i, tok := range gc.PromptTokens {
				if logits, hidden, err = run(tok); err != nil {
					t.Fatal(err)
				}
				check("prompt logits", i, logits, gc.PromptLogits[i], &worstLogit, b.Logits)
				check("hidden", i, hidden, gc.Hidden[i], &worstHidden, b.Hidden)
			}
			mismatches := 0
			for i, st := range gc.Steps {
				if i < len(gc.StepLogits) {
					check("step logits", len(gc.PromptTokens)+i, logits, gc.StepLogits[i], &worstLogit, b.Logits)
				}
				if got := Argmax(logits); got != st.Token {
					gap := st.Top[0][1] - st.Top[1][1]
					if quantized && gap < nearTie {
						t.Logf("step %d: token %d, llama.cpp chose %d: a near-tie (gap %.3g)", i, got, st.Token, gap)
					} else {
						t.Errorf("step %d: token %d, llama.cpp chose %d (its top-2 gap %.3g)", i, got, st.Token, gap)
						if mismatches++; mismatches > 3 {
							t.FailNow()
						}
					}
				}
				// Follow llama.cpp's tokens so later positions stay comparable.
				if logits, hidden, err = run(st.Token); err != nil {
					t.Fatal(err)
				}
				if p := len(gc.PromptTokens) + i; p < len(gc.Hidden) {
					check("hidden", p, hidden, gc.Hidden[p], &worstHidden, b.Hidden)
				}
			}
			slices.Sort(rels)
			if m := rels[len(rels)/2]; m > b.Median {
				t.Errorf("median relative error %.2e > %.0e", m, b.Median)
			}
			t.Logf("max relative error: logits %.2e, hidden %.2e; median %.2e", worstLogit, worstHidden, rels[len(rels)/2])
		})
	}
}
