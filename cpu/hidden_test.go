package cpu

import (
	"errors"
	"slices"
	"testing"
)

// Hidden hands out, without the output layer, the hidden states a
// forward pass computes, over more rows than one batch; an error from the
// callback stops it; and the target then runs on as after a forward pass.
func TestHiddenEqualsForwardFeatures(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	m := loadTest(t, "stories260K-f32.gguf")
	tokens := make([]int, maxBatch+21)
	for i := range tokens {
		tokens[i] = 3 + (11*i)%500
	}
	want := NewTarget(m, pool, 0)
	_, feats, err := want.ForwardFeatures(tokens)
	if err != nil {
		t.Fatal(err)
	}

	got := NewTarget(m, pool, 0)
	var rows []int
	err = got.Hidden(tokens, func(pos int, h []float32) error {
		rows = append(rows, pos)
		if !slices.Equal(h, feats[pos]) {
			t.Errorf("row %d differs from ForwardFeatures'", pos)
		}
		return nil
	})
	if err != nil || len(rows) != len(tokens) || !slices.IsSorted(rows) || got.Len() != len(tokens) {
		t.Fatalf("rows %v, length %d, %v", rows, got.Len(), err)
	}
	// The next token sees the committed ones as after Forward.
	a, err := want.Forward([]int{5})
	if err != nil {
		t.Fatal(err)
	}
	b, err := got.Forward([]int{5})
	if err != nil || !slices.Equal(a, b) {
		t.Fatalf("the token after Hidden's differs from the one after ForwardFeatures' (%v)", err)
	}

	stop := errors.New("stop")
	if err := got.Truncate(0); err != nil {
		t.Fatal(err)
	}
	n := 0
	err = got.Hidden(tokens, func(int, []float32) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Errorf("an error from the callback: %v after %d rows", err, n)
	}
	if err := got.Hidden(nil, nil); err == nil {
		t.Error("no tokens: no error")
	}
	if err := got.Hidden(make([]int, got.Context()+1), nil); err == nil {
		t.Error("more tokens than the context: no error")
	}
}

// With the last layers, the final norm and the LM head offloaded (to the
// host device's layer path, and to a GPU where there is one), Hidden hands
// out what ForwardFeatures does there, the output layer skipped on that
// device too.
func TestHiddenOffloaded(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	m := loadTest(t, "stories260K-f32.gguf")
	tokens := make([]int, maxBatch+5)
	for i := range tokens {
		tokens[i] = 3 + (7*i)%500
	}
	for _, d := range layerDevices(t) {
		_, feats, err := offloaded(t, d.dev, m, pool, 2).ForwardFeatures(tokens)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		err = offloaded(t, d.dev, m, pool, 2).Hidden(tokens, func(pos int, h []float32) error {
			if n++; !slices.Equal(h, feats[pos]) {
				t.Errorf("%s: row %d differs from ForwardFeatures'", d.name, pos)
			}
			return nil
		})
		if err != nil || n != len(tokens) {
			t.Errorf("%s: %d rows, %v", d.name, n, err)
		}
	}
}
