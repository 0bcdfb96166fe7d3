package engine

import (
	"slices"
	"testing"

	"dovetail/engine/tree"
)

// The acceptor follows the target's own choices down a hand-made tree and
// stops at the first node without one.
func TestAcceptGreedyByHand(t *testing.T) {
	// Tree: 0:[tok 5] 1:[tok 6 under 0] 2:[tok 7 under 0] 3:[tok 8 under 2]
	tr := &tree.Tree{Tokens: []int{5, 6, 7, 8}, Parents: []int{-1, 0, 0, 2}, Depths: []int{1, 2, 2, 3}}
	logits := make([][]float32, 5)
	argmaxAt := []int{5, 7, 1, 8, 9} // the target's choice after root, node0, ...
	for i := range logits {
		logits[i] = make([]float32, 10)
		logits[i][argmaxAt[i]] = 5
	}
	a := newAcceptor(NewSampler(SamplerParams{}))
	path, next := a.accept(tr, logits, []int{1})
	// root → 5 (node 0) → 7 (node 2) → 8 (node 3) → bonus 9.
	if !slices.Equal(path, []int{0, 1, 3, 4}) || next != 9 {
		t.Errorf("path %v next %d", path, next)
	}
	logits[0][5], logits[0][2] = 0, 5
	path, next = a.accept(tr, logits, []int{1})
	if !slices.Equal(path, []int{0}) || next != 2 {
		t.Errorf("first miss: path %v next %d", path, next)
	}
}
