package engine

import "dovetail/engine/tree"

// acceptor walks a verified tree and decides which draft tokens the target
// would have produced itself. Node 0 is the root; node i+1 is tree node i.
type acceptor struct {
	s        *Sampler
	children [][]int
}

func newAcceptor(s *Sampler) *acceptor {
	return &acceptor{s: s}
}

// accept returns the accepted path (verify-node indices from the root
// down) and the next token.
//
// At each node the target draws its own token, greedy or sampled, exactly
// as plain decoding would at that position (a sampler's draw depends only
// on the seed, the position and the distribution there, which the
// penalties and Mirostat's mu take from the path before it: the walk
// passes that path as history and draws in its order); the path follows
// the child with that token, and the first node without one ends it, its
// draw being the next token. So the output is the very text plain decoding
// gives with the same seed, not only of the same distribution. (A draft
// token x is thus accepted with probability p(x), as by recursive rejection
// over point-mass proposals.)
func (a *acceptor) accept(tree *tree.Tree, logits [][]float32, history []int) (path []int, next int) {
	n := tree.Len() + 1
	a.children = a.children[:0]
	for i := 0; i < n; i++ {
		a.children = append(a.children, nil)
	}
	for i, p := range tree.Parents {
		a.children[p+1] = append(a.children[p+1], i+1)
	}
	path = []int{0}
	v := 0
	for {
		tok := a.s.Sample(logits[v], history)
		c := a.child(v, tree, tok)
		if c < 0 {
			return path, tok
		}
		path, history, v = append(path, c), append(history, tok), c
	}
}

func (a *acceptor) child(v int, tree *tree.Tree, tok int) int {
	for _, c := range a.children[v] {
		if tree.Tokens[c-1] == tok {
			return c
		}
	}
	return -1
}
