package cpu

import "fmt"

// Extend runs tree nodes after the committed prefix and the nodes pending
// from earlier Extend calls, one forward each. Node i's parent is
// parents[i]: an index into the pending nodes (earlier calls first, then
// this call's, so a parent always comes before its child), or -1 for a
// child of the committed prefix. A node sees the committed prefix, its
// ancestors and itself, at position Len + depth. logits[i] and hidden[i]
// receive node i's outputs (either may be nil).
func (r *Reference) Extend(s *State, tokens, parents []int, logits, hidden [][]float32) error {
	if len(parents) != len(tokens) {
		return fmt.Errorf("extend: %d tokens but %d parents", len(tokens), len(parents))
	}
	base := len(s.pending)
	if s.Cache.Len+base+len(tokens) > s.Cache.Cap() {
		return fmt.Errorf("context full: %d committed + %d tree nodes > %d", s.Cache.Len, base+len(tokens), s.Cache.Cap())
	}
	for i, p := range parents {
		if p < -1 || p >= base+i {
			return fmt.Errorf("extend: node %d has parent %d, want -1 or an earlier node", base+i, p)
		}
	}
	for i, tok := range tokens {
		p := parents[i]
		depth := 0
		if p >= 0 {
			depth = s.pending[p].depth + 1
		}
		s.pending = append(s.pending, treeNode{parent: p, depth: depth})
		slot := s.Cache.Len + base + i
		var lg, hd []float32
		if logits != nil {
			lg = logits[i]
		}
		if hidden != nil {
			hd = hidden[i]
		}
		if err := r.forward(s, tok, slot, s.Cache.Len+depth, s.visible(p, slot), lg, hd); err != nil {
			s.pending = s.pending[:base]
			return err
		}
	}
	return nil
}

// Commit keeps the pending nodes on path — indices of pending nodes, a
// chain from a child of the committed prefix down, each the parent of the
// next — as the next committed positions, and drops the other pending
// nodes. An empty path drops them all.
func (s *State) Commit(path []int) error {
	if err := checkPath(s.pending, path); err != nil {
		return err
	}
	// path is ascending, so moving slot Len+p down to Len+k never
	// overwrites a slot still to be moved.
	c := s.Cache
	for k, p := range path {
		if p == k {
			continue
		}
		for l := range c.K {
			copy(c.key(l, c.Len+k), c.key(l, c.Len+p))
			copy(c.value(l, c.Len+k), c.value(l, c.Len+p))
		}
	}
	c.Len += len(path)
	s.pending = s.pending[:0]
	return nil
}

// checkPath verifies that path is a chain of pending nodes from a child of
// the committed prefix down, each the parent of the next.
func checkPath(pending []treeNode, path []int) error {
	for k, p := range path {
		if p < 0 || p >= len(pending) {
			return fmt.Errorf("commit: node %d is not pending (%d are)", p, len(pending))
		}
		want := -1
		if k > 0 {
			want = path[k-1]
		}
		if pending[p].parent != want {
			return fmt.Errorf("commit: node %d's parent is %d, not %d: the path is not a chain", p, pending[p].parent, want)
		}
	}
	return nil
}
