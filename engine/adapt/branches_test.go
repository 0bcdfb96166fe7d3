package adapt

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// A verified tree's rejected nodes come back as windows: the committed text
// up to where the node's path leaves it, then the path, each position with
// its own feature; never across sequences, never through an evicted node.
func TestRecordsBranches(t *testing.T) {
	const h = 3
	r, err := NewRecords(h, 100*RecordBytes(h))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.KeepBranches(5 * BranchBytes(h)); err != nil {
		t.Fatal(err)
	}
	// Sequence 1: positions 0..9 (tokens 0..9), then a round whose tree is
	//
	//	root 9 ─┬─ 10 ── 11 (committed: root, 10, 11)
	//	        ├─ 50 ── 51
	//	        └─ 60
	//	   10 ─── 70
	//
	// Features carry the token, so a window shows where each came from.
	f := func(tok int) []float32 { return feat(float32(tok), h) }
	seq1 := []int{0, 1, 2, 3, 4, 5, 6, 7, 8}
	feats := make([][]float32, len(seq1))
	for i, tok := range seq1 {
		feats[i] = f(tok)
	}
	r.Append(1, seq1, feats)
	nodes := []int{9, 10, 50, 60, 11, 51, 70}
	parents := []int{-1, 0, 0, 0, 1, 2, 1}
	nf := make([][]float32, len(nodes))
	for i, tok := range nodes {
		nf[i] = f(tok)
	}
	path := []int{0, 1, 4}
	first := r.Append(1, []int{9, 10, 11}, [][]float32{f(9), f(10), f(11)})
	if first != 9 {
		t.Fatalf("first committed position %d, want 9", first)
	}
	if got := r.AppendBranches(first, nodes, parents, nf, path); got != 4 {
		t.Fatalf("kept %d rejected nodes, want 4 (50, 60, 51, 70)", got)
	}
	want := map[int][]int{ // the window of a rejected node, at length 5
		50: {6, 7, 8, 9, 50},
		60: {6, 7, 8, 9, 60},
		51: {7, 8, 9, 50, 51},
		70: {7, 8, 9, 10, 70},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[int]bool{}
	for _, w := range r.SampleBranches(rng, 200, 5, 0, r.Len()) {
		last := w.Tokens[len(w.Tokens)-1]
		if !slices.Equal(w.Tokens, want[last]) {
			t.Fatalf("window %v, want %v", w.Tokens, want[last])
		}
		for i, tok := range w.Tokens {
			if w.Features[i][0] != float32(tok) {
				t.Fatalf("window %v: feature %v at token %d", w.Tokens, w.Features[i], tok)
			}
		}
		seen[last] = true
	}
	if len(seen) != 4 {
		t.Errorf("sampled the windows of %v, want all four rejected nodes", seen)
	}
	// Anchors outside the span are not sampled: 70 hangs from position 10.
	for _, w := range r.SampleBranches(rng, 100, 5, 10, r.Len()) {
		if w.Tokens[len(w.Tokens)-1] != 70 {
			t.Fatalf("window %v anchored before the span", w.Tokens)
		}
	}
	if ws := r.SampleBranches(rng, 10, 5, 0, 9); ws != nil {
		t.Errorf("windows %v anchored after the span", ws)
	}

	// Sequence 2 starts: its context stops at its first position. Its tree
	// has 5 rejected nodes, a path 80 → 81 → 82 and two more, which evict
	// 50, 60, 51 and 70 from the branch ring of 5.
	first = r.Append(2, []int{100}, [][]float32{f(100)})
	r.AppendBranches(first, []int{100, 80, 81, 82, 83, 84}, []int{-1, 0, 1, 2, 0, 0},
		[][]float32{f(100), f(80), f(81), f(82), f(83), f(84)}, []int{0})
	if r.Branches() != 5 {
		t.Fatalf("%d rejected nodes held, want 5", r.Branches())
	}
	got := map[int][]int{}
	for _, w := range r.SampleBranches(rng, 200, 5, 0, r.Len()) {
		got[w.Tokens[len(w.Tokens)-1]] = w.Tokens
	}
	wantSeq2 := map[int][]int{80: {100, 80}, 81: {100, 80, 81}, 82: {100, 80, 81, 82}, 83: {100, 83}, 84: {100, 84}}
	if len(got) != len(wantSeq2) {
		t.Fatalf("windows %v, want %v", got, wantSeq2)
	}
	for k, w := range wantSeq2 {
		if !slices.Equal(got[k], w) {
			t.Errorf("window of %d: %v, want %v", k, got[k], w)
		}
	}
	// A window too short for a path holds none of it.
	for _, w := range r.SampleBranches(rng, 50, 3, 0, r.Len()) {
		if w.Tokens[len(w.Tokens)-1] == 82 {
			t.Fatalf("window %v longer than 3", w.Tokens)
		}
	}
	// One more rejected node evicts 80: 81 and 82 lose their path.
	first = r.Append(2, []int{101}, [][]float32{f(101)})
	r.AppendBranches(first, []int{101, 90}, []int{-1, 0}, [][]float32{f(101), f(90)}, []int{0})
	for _, w := range r.SampleBranches(rng, 200, 5, 0, r.Len()) {
		if last := w.Tokens[len(w.Tokens)-1]; last == 81 || last == 82 {
			t.Fatalf("window %v through an evicted node", w.Tokens)
		}
	}
}

// Without KeepBranches nothing is kept, and the adapter refuses a share of
// branch windows outside [0, 1].
func TestBranchesOff(t *testing.T) {
	r, _ := NewRecords(2, 10*RecordBytes(2))
	first := r.Append(1, []int{1}, [][]float32{feat(1, 2)})
	if n := r.AppendBranches(first, []int{1, 2}, []int{-1, 0}, [][]float32{feat(1, 2), feat(2, 2)}, []int{0}); n != 0 || r.Branches() != 0 {
		t.Errorf("kept %d rejected nodes without KeepBranches", n)
	}
	if ws := r.SampleBranches(rand.New(rand.NewPCG(1, 1)), 4, 2, 0, 1); ws != nil {
		t.Errorf("windows %v without KeepBranches", ws)
	}
	cfg := DefaultConfig()
	cfg.Branches = 1.5
	if _, err := NewAdapter(nil, 2, cfg, nil); err == nil {
		t.Error("a share of 1.5 of windows from rejected branches accepted")
	}
}
