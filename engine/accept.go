package engine

// acceptor walks a verified tree and decides which draft tokens the target
// would have produced itself. Node 0 is the root; node i+1 is tree node i.
type acceptor struct {
	s        *Sampler
	probs    []float32
	children [][]int
}

func newAcceptor(s *Sampler, vocab int) *acceptor {
	return &acceptor{s: s, probs: make([]float32, vocab)}
}

// accept returns the accepted path (verify-node indices from the root
// down) and the next token, drawn from the target's processed distribution
// at the path's last node.
//
// Greedy: follow the child whose token is the target's choice; the first
// miss ends the path, and the target's choice there is the bonus token, so
// the output equals plain greedy decoding.
//
// Sampling: recursive rejection over the children as point-mass
// proposals: accept child x with probability r(x)/Σr under the residual r
// (initially the target's distribution); on rejection zero r(x). If every
// child fails, sample from r. The output has exactly the target's
// distribution.
func (a *acceptor) accept(tree *Tree, logits [][]float32, history []int) (path []int, next int) {
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
		if a.s.p.Greedy() {
			tok := a.s.Sample(logits[v], history)
			c := a.child(v, tree, tok)
			if c < 0 {
				return path, tok
			}
			path, history, v = append(path, c), append(history, tok), c
			continue
		}
		a.s.Probs(a.probs, logits[v], history)
		sum := float64(1)
		moved := false
		fallback := -1
		for _, c := range a.children[v] {
			tok := tree.Tokens[c-1]
			px := float64(a.probs[tok])
			if px > 0 && a.s.Float64()*sum < px {
				path, history, v = append(path, c), append(history, tok), c
				moved = true
				break
			}
			sum -= px
			a.probs[tok] = 0
			if fallback < 0 {
				fallback = tok
			}
		}
		if !moved {
			return path, a.drawResidual(fallback)
		}
	}
}

func (a *acceptor) child(v int, tree *Tree, tok int) int {
	for _, c := range a.children[v] {
		if tree.Tokens[c-1] == tok {
			return c
		}
	}
	return -1
}

// drawResidual samples from the residual in a.probs. Its mass is summed
// afresh rather than tracked, so float rounding cannot leave it empty; if
// it is (every token of nonzero probability was a rejected child, possible
// only by rounding), the first rejected child is returned.
func (a *acceptor) drawResidual(fallback int) int {
	var total float64
	for _, p := range a.probs {
		total += float64(p)
	}
	if total <= 0 {
		return fallback
	}
	u := a.s.Float64() * total
	last := fallback
	var cum float64
	for id, p := range a.probs {
		if p == 0 {
			continue
		}
		cum += float64(p)
		last = id
		if u < cum {
			return id
		}
	}
	return last
}
