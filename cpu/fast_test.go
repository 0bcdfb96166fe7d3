package cpu

import (
	"slices"
	"testing"
	"time"

	"dovetail/cpu/kernels"
	"dovetail/cpu/reference"
	"dovetail/internal/golden"
	"dovetail/models"
)

// levels returns every kernel set this machine can run.
func levels(t testing.TB) []*kernels.Set {
	var sets []*kernels.Set
	for _, name := range kernels.Available() {
		k, err := kernels.ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, k)
	}
	return sets
}

// The fast path at every kernel level matches llama.cpp as the reference
// does.
func TestFastGolden(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	for _, k := range levels(t) {
		t.Run(k.Name, func(t *testing.T) {
			golden.Check(t, func(m *models.Llama) golden.Runner {
				return targetRunner(NewTargetWith(NewFast(m, k, pool, 0)))
			})
		})
	}
}

// With the Go kernels the fast path does the reference's arithmetic in the
// same order, batch or no batch, so it equals it bit for bit: any
// difference is a bug in batching, masks, positions or cache compaction.
func TestFastGoEqualsReference(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	k, err := kernels.ByName("go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"stories260K-f32.gguf", "stories260K-Q4_0-mixed.gguf", "tinystories656K-F16.gguf", "tinystories656K-Q8_0.gguf"} {
		m := loadTest(t, name)
		prompt := []int{1, 403, 407, 261, 380, 300, 301}
		ref := reference.New(m, pool.Threads(), 0)
		rs := ref.NewState()
		fast := NewTargetWith(NewFast(m, k, pool, 0))
		// The prompt in one batch, every row's outputs kept.
		par := []int{-1, 0, 1, 2, 3, 4, 5}
		lg, hd, err := fast.Extend(prompt, par)
		if err != nil {
			t.Fatal(err)
		}
		wl := make([]float32, m.Config.Vocab)
		wh := make([]float32, m.Config.Hidden)
		for i, tok := range prompt {
			ref.Forward(rs, tok, wl, wh)
			if !slices.Equal(lg[i], wl) || !slices.Equal(hd[i], wh) {
				t.Fatalf("%s: prompt row %d differs from the reference", name, i)
			}
		}
		if err := fast.Commit([]int{0, 1, 2, 3, 4, 5, 6}); err != nil {
			t.Fatal(err)
		}
		// A tree after it, in two Extend calls.
		tokens := []int{30, 31, 32, 33, 34, 35, 36}
		parents := []int{-1, 0, 0, 1, -1, 3, 4}
		fl1, _, _ := fast.Extend(tokens[:3], parents[:3])
		got := cloneRows(fl1)
		fl2, _, _ := fast.Extend(tokens[3:], parents[3:])
		got = append(got, cloneRows(fl2)...)
		want := make([][]float32, len(tokens))
		for i := range want {
			want[i] = make([]float32, m.Config.Vocab)
		}
		if err := ref.Extend(rs, tokens, parents, want, nil); err != nil {
			t.Fatal(err)
		}
		for i := range tokens {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("%s: tree node %d differs from the reference", name, i)
			}
		}
		path := []int{0, 1, 3, 5}
		if err := fast.Commit(path); err != nil {
			t.Fatal(err)
		}
		if err := rs.Commit(path); err != nil {
			t.Fatal(err)
		}
		fl, _ := fast.Forward([]int{9, 10})
		ref.Forward(rs, 9, nil, nil)
		ref.Forward(rs, 10, wl, nil)
		if !slices.Equal(fl, wl) || fast.Len() != rs.Cache.Len {
			t.Errorf("%s: after commit, decoding differs from the reference", name)
		}
	}
}

// At a level that packs weights, a batch of rows scores each row bit for
// bit as one-row passes do (decode), with or without AMX: so verifying a
// draft accepts exactly what decoding the target alone would emit.
func TestFastBatchEqualsDecode(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	tested := false
	for _, k := range levels(t) {
		if k.PackRows == 0 {
			continue
		}
		tested = true
		for _, name := range []string{"stories260K-Q4_0-mixed.gguf", "tinystories656K-Q8_0.gguf"} {
			m := loadTest(t, name)
			tokens := make([]int, 21) // one activation tile of 16 and a partial one
			parents := make([]int, len(tokens))
			for i := range tokens {
				tokens[i] = 30 + 7*i
				parents[i] = i - 1
			}
			batch := NewTargetWith(NewFast(m, k, pool, 0))
			lg, hd, err := batch.Extend(tokens, parents)
			if err != nil {
				t.Fatal(err)
			}
			one := NewTargetWith(NewFast(m, k, pool, 0))
			for i, tok := range tokens {
				l1, h1, err := one.Extend([]int{tok}, []int{-1})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(lg[i], l1[0]) || !slices.Equal(hd[i], h1[0]) {
					t.Fatalf("%s %s: row %d of a %d-row batch differs from decoding it alone", k.Name, name, i, len(tokens))
				}
				if err := one.Commit([]int{0}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if !tested {
		t.Skip("no kernel level here packs weights")
	}
}

// Products and attention small enough to run on the caller alone give
// what they give split over the pool's threads, at every kernel level:
// the whole forward pass once with every call alone, once with none.
func TestFastAloneEqualsSplit(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	prompt, next := []int{1, 403, 407, 261, 380}, []int{300, 301, 302}
	for _, k := range levels(t) {
		for _, name := range []string{"stories260K-Q4_0-mixed.gguf", "tinystories656K-F16.gguf", "tinystories656K-Q8_0.gguf"} {
			m := loadTest(t, name)
			var runs [2][][]float32
			for i, b := range []int{-1, 1 << 40} {
				tg := NewTargetWith(NewFastWith(m, k, pool, 0, Options{AloneBytes: b}))
				lg, err := tg.Forward(prompt)
				if err != nil {
					t.Fatal(err)
				}
				runs[i] = append(runs[i], lg)
				for _, tok := range next {
					if lg, err = tg.Forward([]int{tok}); err != nil {
						t.Fatal(err)
					}
					runs[i] = append(runs[i], lg)
				}
			}
			for j := range runs[0] {
				if !slices.Equal(runs[0][j], runs[1][j]) {
					t.Errorf("%s %s: forward %d alone differs from split over threads", k.Name, name, j)
				}
			}
		}
	}
}

// WithPool shares the packed weights and decodes as the original does.
func TestFastWithPool(t *testing.T) {
	p1, p2 := NewPool(1), NewPool(2)
	defer p1.Close()
	defer p2.Close()
	for _, k := range levels(t) {
		m := loadTest(t, "tinystories656K-Q8_0.gguf")
		f := NewFast(m, k, p1, 0)
		g := f.WithPool(p2)
		if g.pool != p2 || f.pool != p1 {
			t.Fatalf("%s: WithPool did not switch pools", k.Name)
		}
		for tensor, pk := range f.packed {
			if g.packed[tensor] != pk {
				t.Fatalf("%s: WithPool packed the weights again", k.Name)
			}
		}
		a, b := NewTargetWith(f), NewTargetWith(g)
		la, err := a.Forward([]int{1, 403, 407, 261})
		if err != nil {
			t.Fatal(err)
		}
		lb, err := b.Forward([]int{1, 403, 407, 261})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(la, lb) {
			t.Errorf("%s: the same model on another pool decodes differently", k.Name)
		}
	}
}

// A forward pass yields to the Go scheduler once yieldEvery has passed
// since it last did, and not before.
func TestFastYields(t *testing.T) {
	pool := NewPool(1)
	defer pool.Close()
	f := NewFast(loadTest(t, "stories260K-f32.gguf"), DefaultKernels(), pool, 0)
	s, err := f.NewSeq()
	if err != nil {
		t.Fatal(err)
	}
	long := time.Now().Add(-2 * yieldEvery)
	s.yielded = long
	if err := s.forward([]int{1, 2, 3}, []int{-1, 0, 1}, 3); err != nil {
		t.Fatal(err)
	}
	if !s.yielded.After(long) {
		t.Fatalf("no yield after %v", time.Since(long))
	}
	recent := s.yielded
	if err := s.forward([]int{4}, []int{2}, 0); err != nil {
		t.Fatal(err)
	}
	if time.Since(recent) < yieldEvery && s.yielded != recent {
		t.Errorf("yielded again %v after the last time", s.yielded.Sub(recent))
	}
}

// targetRunner runs t one token at a time, for the golden checks.
func targetRunner(t *Target) golden.Runner {
	return func(tok int) ([]float32, []float32, error) {
		lg, hd, err := t.Extend([]int{tok}, []int{-1})
		if err != nil {
			return nil, nil, err
		}
		return lg[0], hd[0], t.Commit([]int{0})
	}
}
