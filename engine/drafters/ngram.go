package drafters

import "dovetail/engine/tree"

// Ngram is prompt-lookup decoding: it finds the latest tokens
// earlier in the context and proposes what followed them there. It costs
// nothing to run and shines where output copies input (code, edits,
// summaries, repetitive stories).
type Ngram struct {
	// MaxN is the longest suffix looked up (default 4); shorter ones fill
	// the tree when longer ones run out.
	MaxN int
}

// Draft builds a trie of the continuations of up to TopK matches, longest
// suffix match first and the most recent first among equals.
func (d *Ngram) Draft(ctx []int, p tree.Params) (*tree.Tree, error) {
	maxN := d.MaxN
	if maxN <= 0 {
		maxN = 4
	}
	t := &tree.Tree{}
	children := map[[2]int]int{} // (parent, token) → node
	matches := 0
	for n := min(maxN, len(ctx)-1); n >= 1 && matches < p.TopK && t.Len() < p.Tokens; n-- {
		suffix := ctx[len(ctx)-n:]
		// Scan occurrences ending before the suffix itself, latest first.
		for end := len(ctx) - 1; end >= n && matches < p.TopK && t.Len() < p.Tokens; end-- {
			if !equalInts(ctx[end-n:end], suffix) {
				continue
			}
			matches++
			parent, depth := -1, 1
			for i := end; i < len(ctx) && depth <= p.Depth+1 && t.Len() < p.Tokens; i++ {
				tok := ctx[i]
				if c, ok := children[[2]int{parent, tok}]; ok {
					parent = c
				} else {
					children[[2]int{parent, tok}] = t.Len()
					// Later matches rank below earlier ones.
					t.Add(tok, parent, depth, -float64(matches))
					parent = t.Len() - 1
				}
				depth++
			}
		}
	}
	return t, nil
}

func equalInts(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Accepted does nothing: the context is the drafter's whole state.
func (d *Ngram) Accepted([]int, [][]float32) {}

// Reset does nothing.
func (d *Ngram) Reset() {}

// Finish does nothing.
func (d *Ngram) Finish() {}
