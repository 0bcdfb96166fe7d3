package tree

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// treeOf builds a Tree from (token, parent, score) triples.
func treeOf(nodes ...[3]float64) *Tree {
	t := &Tree{}
	for _, n := range nodes {
		p := int(n[1])
		d := 1
		if p >= 0 {
			d = t.Depths[p] + 1
		}
		t.Add(int(n[0]), p, d, n[2])
	}
	return t
}

func TestGraftByHand(t *testing.T) {
	// root → 5 (−0.1) → 6 (−0.5); root → 7 (−1) → 8 (−3); root → 9 (−2)
	base := treeOf([3]float64{5, -1, -0.1}, [3]float64{7, -1, -1}, [3]float64{9, -1, -2},
		[3]float64{6, 0, -0.5}, [3]float64{8, 1, -3})
	orig := slices.Clone(base.Tokens)
	// Room for all: 5 → 6 shared, then 1 2 below 6.
	g := base.Graft([]int{5, 6, 1, 2}, 16)
	if !slices.Equal(g.Tokens, []int{5, 7, 9, 6, 8, 1, 2}) || !slices.Equal(g.Parents, []int{-1, -1, -1, 0, 1, 3, 5}) {
		t.Errorf("graft with room: tokens %v parents %v", g.Tokens, g.Parents)
	}
	// Only the nodes the chain added are the memory's; the shared ones
	// stay the draft's.
	if !slices.Equal(g.Recalled, []bool{false, false, false, false, false, true, true}) {
		t.Errorf("graft with room: recalled %v", g.Recalled)
	}
	// Five nodes at most: the two lowest-scored leaves (8, then 9) go.
	g = base.Graft([]int{5, 6, 1, 2}, 5)
	if !slices.Equal(g.Tokens, []int{5, 7, 6, 1, 2}) || !slices.Equal(g.Parents, []int{-1, -1, 0, 2, 3}) || !slices.Equal(g.Depths, []int{1, 1, 2, 3, 4}) {
		t.Errorf("graft into 5: tokens %v parents %v depths %v", g.Tokens, g.Parents, g.Depths)
	}
	// Nothing off the chain's path left to drop: the chain is cut.
	g = base.Graft([]int{5, 6, 1, 2}, 3)
	if !slices.Equal(g.Tokens, []int{5, 6, 1}) || !slices.Equal(g.Parents, []int{-1, 0, 1}) {
		t.Errorf("graft into 3: tokens %v parents %v", g.Tokens, g.Parents)
	}
	// A chain the tree holds, and an empty one, change nothing.
	if g := base.Graft([]int{7, 8}, 5); g != base {
		t.Error("a chain already in the tree made a new tree")
	}
	if g := base.Graft(nil, 2); g != base {
		t.Error("an empty chain made a new tree")
	}
	// Into an empty tree: the chain alone.
	if g := (&Tree{}).Graft([]int{3, 4}, 8); !slices.Equal(g.Tokens, []int{3, 4}) || !slices.Equal(g.Parents, []int{-1, 0}) {
		t.Errorf("graft into nothing: tokens %v parents %v", g.Tokens, g.Parents)
	}
	if !slices.Equal(base.Tokens, orig) || base.Len() != 5 {
		t.Errorf("the grafted tree changed: %v", base.Tokens)
	}
}

// On random trees: always a valid tree within the limit that holds the
// chain from the root, cut only when the limit leaves no room.
func TestGraftRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for it := range 2000 {
		base := &Tree{}
		for range rng.IntN(20) {
			p := rng.IntN(base.Len()+1) - 1
			d, s := 1, 0.0
			if p >= 0 {
				d, s = base.Depths[p]+1, base.Scores[p]
			}
			tok := rng.IntN(6)
			dup := false
			for c := range base.Len() {
				dup = dup || base.Parents[c] == p && base.Tokens[c] == tok
			}
			if !dup {
				base.Add(tok, p, d, s-rng.Float64())
			}
		}
		chain := make([]int, rng.IntN(9))
		for i := range chain {
			chain[i] = rng.IntN(6)
		}
		limit := 1 + rng.IntN(24)
		g := base.Graft(chain, limit)
		if err := g.Check(); err != nil {
			t.Fatalf("case %d: %v", it, err)
		}
		if g.Len() > max(limit, base.Len()) {
			t.Fatalf("case %d: %d nodes, limit %d (base %d)", it, g.Len(), limit, base.Len())
		}
		// Follow the chain from the root.
		at, depth := -1, 0
		for _, tok := range chain {
			next := -1
			for c := range g.Len() {
				if g.Parents[c] == at && g.Tokens[c] == tok {
					next = c
				}
			}
			if next < 0 {
				break
			}
			at, depth = next, depth+1
		}
		if depth < min(len(chain), limit) {
			t.Fatalf("case %d: %d of the chain %v held within %d nodes: %+v", it, depth, chain, limit, g)
		}
	}
}
