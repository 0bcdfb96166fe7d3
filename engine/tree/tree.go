// Package tree builds the draft trees speculative decoding verifies: the
// EAGLE-2 dynamic tree grown from a draft's ranked proposals (Build,
// BuildRanked), the shapes a tree may take (Params), and a remembered
// chain grafted onto one (Graft).
package tree

import (
	"fmt"
	"slices"

	"dovetail/internal/topk"
)

// Params shape a draft tree: TopK children per expanded node, Depth
// expansion rounds after the root's own top-k (so paths are at most
// Depth+1 long), and at most Tokens nodes in all (γ).
type Params struct {
	TopK   int `json:"top_k"`
	Depth  int `json:"depth"`
	Tokens int `json:"tokens"`
}

// Dovetail's settings from the paper: server and laptop.
var (
	Server = Params{TopK: 10, Depth: 7, Tokens: 16}
	Laptop = Params{TopK: 10, Depth: 4, Tokens: 7}
)

// Validate names the first bad parameter.
func (p Params) Validate() error {
	switch {
	case p.TopK < 1 || p.TopK > 64:
		return fmt.Errorf("tree top-k %d out of range [1, 64]", p.TopK)
	case p.Depth < 0 || p.Depth > 64:
		return fmt.Errorf("tree depth %d out of range [0, 64]", p.Depth)
	case p.Tokens < 1 || p.Tokens > 256:
		return fmt.Errorf("tree tokens %d out of range [1, 256]", p.Tokens)
	}
	return nil
}

// Tree is a draft tree below a root token (the last token of the context,
// which the target has not run yet). Nodes are in parents-first order.
type Tree struct {
	Tokens  []int
	Parents []int     // -1: a child of the root
	Depths  []int     // 1 for the root's children
	Scores  []float64 // cumulative draft log-probability
	// Recalled marks the nodes a text memory proposed rather than the
	// draft model (Graft); nil: none. Only what a live view shows.
	Recalled []bool
}

// IsRecalled reports whether node i came from a text memory.
func (t *Tree) IsRecalled(i int) bool { return i < len(t.Recalled) && t.Recalled[i] }

// Len is the number of nodes.
func (t *Tree) Len() int {
	if t == nil {
		return 0
	}
	return len(t.Tokens)
}

// Add appends a node: token tok below parent (−1: the root) at depth, with
// its cumulative score. Nodes come parents first.
func (t *Tree) Add(tok, parent, depth int, score float64) {
	t.Tokens = append(t.Tokens, tok)
	t.Parents = append(t.Parents, parent)
	t.Depths = append(t.Depths, depth)
	t.Scores = append(t.Scores, score)
}

// Check verifies the invariants: parents first, depths consistent, no two
// siblings with the same token.
func (t *Tree) Check() error {
	seen := map[[2]int]bool{}
	for i, p := range t.Parents {
		want := 1
		if p >= 0 {
			if p >= i {
				return fmt.Errorf("node %d: parent %d does not come first", i, p)
			}
			want = t.Depths[p] + 1
		} else if p != -1 {
			return fmt.Errorf("node %d: parent %d", i, p)
		}
		if t.Depths[i] != want {
			return fmt.Errorf("node %d: depth %d, want %d", i, t.Depths[i], want)
		}
		if seen[[2]int{p, t.Tokens[i]}] {
			return fmt.Errorf("node %d: token %d twice under parent %d", i, t.Tokens[i], p)
		}
		seen[[2]int{p, t.Tokens[i]}] = true
	}
	return nil
}

// draftCand is one token under consideration while a tree is built.
type draftCand struct {
	token, parent, depth int
	score                float64
	pending              int // the drafter's pending-node index once expanded, else -1
}

// ExpandFunc runs the draft model on frontier nodes and returns their
// logits. parents index the drafter's pending nodes (-1: the root).
type ExpandFunc func(tokens, parents []int) ([][]float32, error)

// Choice is one of a node's most likely next tokens.
type Choice = topk.Choice

// RankFunc runs the draft model on frontier nodes and returns each node's
// TopK most likely next tokens, most likely first (ties: the lower token
// first). parents are as ExpandFunc's.
type RankFunc func(tokens, parents []int, k int) ([][]Choice, error)

// Build grows an EAGLE-2 dynamic tree: the root's top-k children; then
// Depth times, expand the TopK best frontier nodes by cumulative
// log-probability and take the top-k children of each; finally keep the
// Tokens best of all candidates. A child never scores above its parent,
// so the kept set is a connected tree.
//
// A frontier node is not expanded when Tokens candidates already score
// at least as high as it does: its descendants score no higher and are
// made after those candidates, which win ties, so none of them could be
// kept. The tree is the one expanding every frontier node would give, at
// a fraction of the draft's work once the draft is confident (with the
// default TopK 10 and Tokens 16, most of a level's ten nodes).
func Build(p Params, rootLogits []float32, expand ExpandFunc) (*Tree, error) {
	return buildTree(p, rankLogits(rootLogits, p.TopK), rankWith(expand), true)
}

// BuildRanked is Build for a draft that ranks its own outputs:
// root holds the root's TopK choices.
func BuildRanked(p Params, root []Choice, rank RankFunc) (*Tree, error) {
	return buildTree(p, root, rank, true)
}

func rankLogits(logits []float32, k int) []Choice { return topk.LogProbs(nil, logits, k, 1) }

// rankWith ranks expand's logits on the host.
func rankWith(expand ExpandFunc) RankFunc {
	return func(tokens, parents []int, k int) ([][]Choice, error) {
		logits, err := expand(tokens, parents)
		if err != nil {
			return nil, err
		}
		out := make([][]Choice, len(logits))
		for i, l := range logits {
			out[i] = rankLogits(l, k)
		}
		return out, nil
	}
}

// buildTree is BuildRanked, with the pruning of hopeless frontier
// nodes optional (tests compare the two).
func buildTree(p Params, root []Choice, rank RankFunc, prune bool) (*Tree, error) {
	var cands []draftCand
	for _, c := range root {
		cands = append(cands, draftCand{token: c.Token, parent: -1, depth: 1, score: c.LogP, pending: -1})
	}
	frontier := make([]int, len(cands))
	for i := range frontier {
		frontier[i] = i
	}
	nPending := 0
	for d := 0; d < p.Depth; d++ {
		if prune {
			frontier = hopeful(cands, frontier, p.Tokens)
		}
		if len(frontier) == 0 {
			break
		}
		toks := make([]int, len(frontier))
		pars := make([]int, len(frontier))
		for i, f := range frontier {
			toks[i] = cands[f].token
			pars[i] = -1
			if pp := cands[f].parent; pp >= 0 {
				pars[i] = cands[pp].pending
			}
		}
		ranked, err := rank(toks, pars, p.TopK)
		if err != nil {
			return nil, err
		}
		var next []int
		for i, f := range frontier {
			cands[f].pending = nPending + i
			for _, c := range ranked[i] {
				next = append(next, len(cands))
				cands = append(cands, draftCand{token: c.Token, parent: f, depth: cands[f].depth + 1,
					score: cands[f].score + c.LogP, pending: -1})
			}
		}
		nPending += len(frontier)
		slices.SortStableFunc(next, func(a, b int) int { return cmpScore(cands[a].score, cands[b].score) })
		frontier = next[:min(p.TopK, len(next))]
	}
	return rerank(cands, p.Tokens), nil
}

// hopeful drops the frontier nodes that at least n candidates score as
// high as: nothing below them can be among the n kept.
func hopeful(cands []draftCand, frontier []int, n int) []int {
	out := frontier[:0]
	for _, f := range frontier {
		above := 0
		for i := range cands {
			if cands[i].score >= cands[f].score {
				above++
			}
		}
		if above < n {
			out = append(out, f)
		}
	}
	return out
}

func cmpScore(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// rerank keeps the best n candidates and orders them parents first.
func rerank(cands []draftCand, n int) *Tree {
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	// Stable on creation order, so a child tied with its parent (a
	// log-probability of exactly 0) comes after it.
	slices.SortStableFunc(order, func(a, b int) int { return cmpScore(cands[a].score, cands[b].score) })
	keep := make([]bool, len(cands))
	for _, i := range order[:min(n, len(order))] {
		keep[i] = true
	}
	kept := order[:0:0]
	for i := range cands {
		// Candidates were created parents first, so creation order is a
		// valid tree order; a kept node whose parent was cut (possible only
		// through rounding) is dropped.
		if keep[i] && (cands[i].parent < 0 || keep[cands[i].parent]) {
			kept = append(kept, i)
		} else {
			keep[i] = false
		}
	}
	slices.SortStableFunc(kept, func(a, b int) int { return cands[a].depth - cands[b].depth })
	index := make(map[int]int, len(kept))
	t := &Tree{}
	for _, i := range kept {
		c := cands[i]
		parent := -1
		if c.parent >= 0 {
			parent = index[c.parent]
		}
		index[i] = t.Len()
		t.Add(c.token, parent, c.depth, c.score)
	}
	return t
}

// Graft returns t with chain, a path of tokens below the root, added: the
// chain's prefix that t already holds is shared, and the rest is appended
// with its parent's score (a remembered continuation is not the draft's to
// score). To stay within limit nodes, t's lowest-scored leaves off the
// chain's path go first; the chain is cut short only when nothing else
// can go. t itself is not changed.
func (t *Tree) Graft(chain []int, limit int) *Tree {
	n := t.Len()
	children := make([]int, n)
	for _, p := range t.Parents {
		if p >= 0 {
			children[p]++
		}
	}
	onPath := make([]bool, n)
	at, i := -1, 0 // the deepest shared node, and the chain's first token not in t
	for ; i < len(chain); i++ {
		next := -1
		for c := range n {
			if t.Parents[c] == at && t.Tokens[c] == chain[i] {
				next = c
				break
			}
		}
		if next < 0 {
			break
		}
		at, onPath[next] = next, true
	}
	rest := chain[i:]
	if len(rest) == 0 {
		return t
	}
	dropped := make([]bool, n)
	size := n
	for size+len(rest) > limit {
		leaf := -1
		for c := n - 1; c >= 0; c-- {
			if !dropped[c] && !onPath[c] && children[c] == 0 && (leaf < 0 || t.Scores[c] < t.Scores[leaf]) {
				leaf = c
			}
		}
		if leaf < 0 {
			rest = rest[:max(0, limit-size)]
			break
		}
		dropped[leaf] = true
		if p := t.Parents[leaf]; p >= 0 {
			children[p]--
		}
		size--
	}
	out := &Tree{}
	index := make([]int, n)
	for c := range n {
		if dropped[c] {
			continue
		}
		parent := t.Parents[c]
		if parent >= 0 {
			parent = index[parent]
		}
		index[c] = out.Len()
		out.Add(t.Tokens[c], parent, t.Depths[c], t.Scores[c])
		out.Recalled = append(out.Recalled, t.IsRecalled(c))
	}
	parent, depth, score := -1, 0, 0.0
	if at >= 0 {
		parent, depth, score = index[at], t.Depths[at], t.Scores[at]
	}
	for _, tok := range rest {
		out.Add(tok, parent, depth+1, score)
		out.Recalled = append(out.Recalled, true)
		parent, depth = out.Len()-1, depth+1
	}
	return out
}
