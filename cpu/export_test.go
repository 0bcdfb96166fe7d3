package cpu

import (
	"slices"
	"strings"
	"testing"

	"dovetail/cpu/reference"
	"dovetail/internal/golden"
)

// refFeatures runs tokens on the reference (nodes of a tree when parents is
// set, else the next positions) and returns each one's residual stream
// before layers, side by side.
func refFeatures(t *testing.T, r *reference.Reference, s *reference.State, layers [3]int, tokens, parents []int) [][]float32 {
	t.Helper()
	H := r.M.Config.Hidden
	var rows [][]float32
	s.Before = func(l int, x []float32) {
		if l == 0 {
			rows = append(rows, make([]float32, 3*H))
		}
		for j, a := range layers {
			if a == l {
				copy(rows[len(rows)-1][j*H:], x)
			}
		}
	}
	defer func() { s.Before = nil }()
	if parents != nil {
		if err := r.Extend(s, tokens, parents, nil, nil); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	for _, tok := range tokens {
		if err := r.Forward(s, tok, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	return rows
}

// compareRows holds got to want within tol (relative, as golden.Compare
// measures it; 0: bit for bit).
func compareRows(t *testing.T, what string, got, want [][]float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for i := range want {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("%s: row %d is %d wide, want %d", what, i, len(got[i]), len(want[i]))
		}
		if _, rel := golden.Compare(got[i], want[i]); rel > tol || (tol == 0 && !slices.Equal(got[i], want[i])) {
			t.Errorf("%s: row %d differs from the reference by %.2e", what, i, rel)
		}
	}
}

// exportTokens are n tokens of a test prompt.
func exportTokens(n, step int) []int {
	tokens := make([]int, n)
	for i := range tokens {
		tokens[i] = 3 + (step*i)%500
	}
	return tokens
}

// After ExportLayers, a prompt's feature rows (over more than one batch)
// and a tree's (in one batch, handed out in place, and in several, copied)
// are the reference's residual stream before the three layers: bit for
// bit with the Go kernels, within the golden tests' hidden-state bound with
// the SIMD ones (whose float order flips an int8 or f16 rounding now and
// then, which the cache carries on: 2.7e-3 measured at worst).
func TestExportLayersMatchesReference(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	for _, k := range levels(t) {
		for _, c := range []struct {
			name   string
			layers [3]int
		}{
			{"stories260K-f32.gguf", [3]int{0, 2, 4}},
			{"stories260K-Q8_0-mixed.gguf", [3]int{2, 2, 3}},
			{"tinystories656K-F16.gguf", [3]int{0, 1, 1}},
		} {
			what := k.Name + "/" + c.name
			tol := 0.0
			if k.Name != "go" {
				tol = golden.BoundsFor(c.name).Hidden
			}
			m := loadTest(t, c.name)
			// Room for the prompt and both trees past a small model's
			// trained context.
			ref := reference.New(m, pool.Threads(), 256)
			rs := ref.NewState()
			tg := NewTargetWith(NewFast(m, k, pool, 256))
			if err := tg.ExportLayers(c.layers); err != nil {
				t.Fatal(err)
			}
			prompt := exportTokens(maxBatch+5, 11)
			_, feats, err := tg.ForwardFeatures(prompt)
			if err != nil {
				t.Fatal(err)
			}
			compareRows(t, what+" prompt", feats, refFeatures(t, ref, rs, c.layers, prompt, nil), tol)

			tokens := []int{30, 31, 32, 33, 34, 35, 36}
			parents := []int{-1, 0, 0, 1, -1, 3, 4}
			_, hd, err := tg.Extend(tokens, parents)
			if err != nil {
				t.Fatal(err)
			}
			compareRows(t, what+" tree", hd, refFeatures(t, ref, rs, c.layers, tokens, parents), tol)

			// A tree of more nodes than a batch: two branches off the
			// first tree's nodes, interleaved.
			big := exportTokens(maxBatch+6, 7)
			bigParents := make([]int, len(big))
			for i := range bigParents {
				bigParents[i] = len(tokens) + i - 2
			}
			bigParents[0], bigParents[1] = 2, 5
			_, hd, err = tg.Extend(big, bigParents)
			if err != nil {
				t.Fatal(err)
			}
			compareRows(t, what+" large tree", hd, refFeatures(t, ref, rs, c.layers, big, bigParents), tol)
		}
	}
}

// With export on, Hidden still hands out the final normed hidden states,
// as a target without export does.
func TestExportLayersKeepsHidden(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	m := loadTest(t, "stories260K-f32.gguf")
	tokens := exportTokens(maxBatch+3, 5)
	_, want, err := NewTarget(m, pool, 0).ForwardFeatures(tokens)
	if err != nil {
		t.Fatal(err)
	}
	tg := NewTarget(m, pool, 0)
	if err := tg.ExportLayers([3]int{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	n := 0
	err = tg.Hidden(tokens, func(pos int, h []float32) error {
		if n++; !slices.Equal(h, want[pos]) {
			t.Errorf("row %d: Hidden with export on differs from the final hidden state", pos)
		}
		return nil
	})
	if err != nil || n != len(tokens) {
		t.Fatalf("%d rows, %v", n, err)
	}
}

// Without ExportLayers nothing is captured: the feature rows are the final
// hidden states where the pass left them, and no row of layers is kept.
func TestExportLayersOffCopiesNothing(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	m := loadTest(t, "stories260K-f32.gguf")
	tg := NewTarget(m, pool, 0)
	if _, _, err := tg.ForwardFeatures(exportTokens(10, 3)); err != nil {
		t.Fatal(err)
	}
	_, hd, err := tg.Extend([]int{30, 31, 32}, []int{-1, 0, 0})
	if err != nil {
		t.Fatal(err)
	}
	if tg.s.feat != nil || len(hd[0]) != m.Config.Hidden || &hd[0][0] != &tg.s.hidden[0] {
		t.Errorf("export off: %d floats captured, rows %d wide, in place %v", len(tg.s.feat), len(hd[0]), &hd[0][0] == &tg.s.hidden[0])
	}
}

// Layers out of range or out of order, or run by the offloaded device past
// its first layer, are refused by name; the first offloaded layer's input
// is the state handed to the device, exported as the reference has it.
func TestExportLayersErrors(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	m := loadTest(t, "stories260K-f32.gguf")
	tg := NewTarget(m, pool, 0)
	for _, c := range []struct {
		layers [3]int
		want   string
	}{
		{[3]int{-1, 2, 3}, "layer -1: the model has layers 0 to 4"},
		{[3]int{0, 2, 5}, "layer 5: the model has layers 0 to 4"},
		{[3]int{2, 1, 3}, "[2 1 3]: want them in increasing order"},
	} {
		if err := tg.ExportLayers(c.layers); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("layers %v: %v, want an error saying %q", c.layers, err, c.want)
		}
	}
	for _, d := range layerDevices(t) {
		off := offloaded(t, d.dev, m, pool, 2) // layers 3 and 4 there
		err := off.ExportLayers([3]int{0, 2, 4})
		if err == nil || !strings.Contains(err.Error(), "layer 4 runs on the GPU (layers from 3 are offloaded)") {
			t.Errorf("%s: a layer past the offload's first: %v", d.name, err)
		}
		layers := [3]int{0, 2, 3}
		if err := off.ExportLayers(layers); err != nil {
			t.Fatalf("%s: the offload's first layer: %v", d.name, err)
		}
		prompt := exportTokens(20, 13)
		_, feats, err := off.ForwardFeatures(prompt)
		if err != nil {
			t.Fatal(err)
		}
		ref := reference.New(m, pool.Threads(), 0)
		compareRows(t, d.name+" offloaded", feats, refFeatures(t, ref, ref.NewState(), layers, prompt, nil), golden.BoundsFor("stories260K-f32.gguf").Hidden)
	}
}
