package reference

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
	base := s.pending.Len()
	if s.Cache.Len+base+len(tokens) > s.Cache.Cap() {
		return fmt.Errorf("context full: %d committed + %d tree nodes > %d", s.Cache.Len, base+len(tokens), s.Cache.Cap())
	}
	if err := s.pending.Check(parents); err != nil {
		return err
	}
	pos := s.pending.Add(parents, s.Cache.Len, nil)
	for i, tok := range tokens {
		slot := s.Cache.Len + base + i
		var lg, hd []float32
		if logits != nil {
			lg = logits[i]
		}
		if hidden != nil {
			hd = hidden[i]
		}
		if err := r.forward(s, tok, slot, pos[i], s.visible(parents[i], slot), lg, hd); err != nil {
			s.pending.Truncate(base)
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
	c := s.Cache
	err := s.pending.Commit(path, func(to, from int) {
		for l := range c.K {
			copy(c.key(l, c.Len+to), c.key(l, c.Len+from))
			copy(c.value(l, c.Len+to), c.value(l, c.Len+from))
		}
	})
	if err == nil {
		c.Len += len(path)
	}
	return err
}
