package cpu

import (
	"slices"
	"strings"
	"testing"

	"dovetail/internal/golden"
	"dovetail/models"
)

func loadTest(t *testing.T, name string) *models.Llama {
	t.Helper()
	m, err := models.LoadLlama(golden.ModelPath(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// pathTo lists the nodes from the root-level ancestor of n down to n.
func pathTo(parents []int, n int) []int {
	var p []int
	for ; n >= 0; n = parents[n] {
		p = append(p, n)
	}
	slices.Reverse(p)
	return p
}

// Each tree node's logits and hidden state equal those of running its
// root-to-node path as an ordinary sequence: bit for bit with the Go
// kernels, within float-order rounding with the SIMD ones.
func TestExtendMatchesPaths(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	for _, k := range levels(t) {
		tol := 0.0
		if k.Name != "go" {
			tol = 1e-4
		}
		for _, name := range []string{"stories260K-Q8_0-mixed.gguf", "tinystories656K-F16.gguf"} {
			m := loadTest(t, name)
			f := NewFast(m, k, pool, 64)
			prefix := []int{1, 403, 407, 261, 380}
			// Hand-made tree: two roots, branches of different depths.
			tokens := []int{300, 301, 302, 303, 304, 305, 306, 307, 308}
			parents := []int{-1, 0, 0, 1, 3, -1, 5, 2, 6}
			tree := NewTargetWith(f)
			if _, err := tree.Forward(prefix); err != nil {
				t.Fatal(err)
			}
			// Two Extend calls, as a drafter expanding depth by depth makes them.
			lg1, hd1, err := tree.Extend(tokens[:4], parents[:4])
			if err != nil {
				t.Fatal(err)
			}
			gotLogits, gotHidden := cloneRows(lg1), cloneRows(hd1)
			lg2, hd2, err := tree.Extend(tokens[4:], parents[4:])
			if err != nil {
				t.Fatal(err)
			}
			gotLogits = append(gotLogits, cloneRows(lg2)...)
			gotHidden = append(gotHidden, cloneRows(hd2)...)
			for n := range tokens {
				seq := NewTargetWith(f)
				seq.Forward(prefix)
				path := pathTo(parents, n)
				for _, p := range path[:len(path)-1] {
					seq.Forward([]int{tokens[p]})
				}
				wl, wh, _ := seq.Extend([]int{tokens[n]}, []int{-1})
				if _, rel := golden.Compare(gotLogits[n], wl[0]); rel > tol {
					t.Errorf("%s/%s: node %d logits differ from its path's by %.2e", k.Name, name, n, rel)
				}
				if _, rel := golden.Compare(gotHidden[n], wh[0]); rel > tol {
					t.Errorf("%s/%s: node %d hidden state differs from its path's by %.2e", k.Name, name, n, rel)
				}
			}
			// Committing a path and decoding on equals decoding the path.
			path := []int{0, 1, 3, 4}
			if err := tree.Commit(path); err != nil {
				t.Fatal(err)
			}
			got, _ := tree.Forward([]int{42})
			seq := NewTargetWith(f)
			seq.Forward(prefix)
			for _, p := range path {
				seq.Forward([]int{tokens[p]})
			}
			want, _ := seq.Forward([]int{42})
			if _, rel := golden.Compare(got, want); tree.Len() != len(prefix)+len(path)+1 || rel > tol {
				t.Errorf("%s/%s: after commit, len %d and logits differ from sequential decoding by %.2e", k.Name, name, tree.Len(), rel)
			}
		}
	}
}

func cloneRows(x [][]float32) [][]float32 {
	out := make([][]float32, len(x))
	for i := range x {
		out[i] = slices.Clone(x[i])
	}
	return out
}

func TestExtendCommitErrors(t *testing.T) {
	pool := NewPool(1)
	defer pool.Close()
	m := loadTest(t, "stories260K-f32.gguf")
	tg := NewTarget(m, pool, 16)
	tg.Forward([]int{1, 2, 3})
	if _, _, err := tg.Extend([]int{5, 6}, []int{-1, 1}); err == nil {
		t.Error("a node that is its own parent was accepted")
	}
	if _, _, err := tg.Extend([]int{5}, []int{-1, 0}); err == nil {
		t.Error("mismatched tokens and parents accepted")
	}
	if _, _, err := tg.Extend([]int{5, 6, 7}, []int{-1, 0, -1}); err != nil {
		t.Fatal(err)
	}
	if err := tg.Commit([]int{0, 2}); err == nil {
		t.Error("a path that is not a chain was committed")
	}
	if err := tg.Commit([]int{1}); err == nil {
		t.Error("a path not starting at the prefix was committed")
	}
	tg.Commit(nil)
	roots := make([]int, 14)
	for i := range roots {
		roots[i] = -1
	}
	if _, _, err := tg.Extend(make([]int, 14), roots); err == nil || !strings.Contains(err.Error(), "context full") {
		t.Errorf("a tree past the context: %v", err)
	}
}
