// Package pending keeps the tree of nodes a sequence holds after its
// committed positions: a draft tree the target verifies in one pass, or
// the draft's own tree as it grows a level at a time. Every sequence with
// a KV cache keeps one (the CPU target and its reference, the draft on a
// device): node i's keys and values sit in cache slot committed+i, it is
// at position committed+depth, and it sees the committed positions, its
// ancestors and itself. Commit keeps one chain of nodes as the next
// committed positions, moving their cache rows down.
package pending

import "fmt"

// Tree is the pending nodes of one sequence, in the order they came (a
// parent always before its children). The zero Tree is empty.
type Tree struct {
	nodes []node
}

type node struct{ parent, depth int }

// Len is the number of pending nodes.
func (t *Tree) Len() int { return len(t.nodes) }

// Reset drops every pending node.
func (t *Tree) Reset() { t.nodes = t.nodes[:0] }

// Truncate drops the nodes from n on (a pass that failed part-way).
func (t *Tree) Truncate(n int) { t.nodes = t.nodes[:n] }

// Check refuses parents for new nodes after the Len() pending ones that
// are not −1 (a child of the committed positions) or an earlier node.
func (t *Tree) Check(parents []int) error {
	base := len(t.nodes)
	for i, p := range parents {
		if p < -1 || p >= base+i {
			return fmt.Errorf("extend: node %d has parent %d, want -1 or an earlier node", base+i, p)
		}
	}
	return nil
}

// Add appends nodes with these parents (see Check) and appends each new
// node's position, committed + depth, to pos.
func (t *Tree) Add(parents []int, committed int, pos []int) []int {
	for _, p := range parents {
		depth := 0
		if p >= 0 {
			depth = t.nodes[p].depth + 1
		}
		t.nodes = append(t.nodes, node{parent: p, depth: depth})
		pos = append(pos, committed+depth)
	}
	return pos
}

// Depth is node i's depth: 0 for a child of the committed positions.
func (t *Tree) Depth(i int) int { return t.nodes[i].depth }

// MaskRows writes the attention mask rows of nodes [from, Len()) into
// dst, Len() values a row (row j for node from+j): 1 for the pending
// nodes the node sees, its ancestors and itself, 0 for the others.
func (t *Tree) MaskRows(dst []uint8, from int) {
	m := len(t.nodes)
	for j := from; j < m; j++ {
		row := dst[(j-from)*m : (j-from+1)*m]
		clear(row)
		for a := j; a >= 0; a = t.nodes[a].parent {
			row[a] = 1
		}
	}
}

// Path appends to dst node i's ancestors and i itself, root first, each
// plus offset (the cache slot of pending node 0); i = −1 appends nothing.
func (t *Tree) Path(dst []int, i, offset int) []int {
	mark := len(dst)
	for p := i; p >= 0; p = t.nodes[p].parent {
		dst = append(dst, offset+p)
	}
	for a, b := mark, len(dst)-1; a < b; a, b = a+1, b-1 {
		dst[a], dst[b] = dst[b], dst[a]
	}
	return dst
}

// Commit keeps the pending nodes on path — indices of pending nodes, a
// chain from a child of the committed positions down, each the parent of
// the next — as the next committed positions, and drops the others. move
// is called for each node that must move in the cache: the node path[k]
// moves to pending index k. An empty path drops every node.
func (t *Tree) Commit(path []int, move func(to, from int)) error {
	if err := t.CheckPath(path); err != nil {
		return err
	}
	Moves(path, move)
	t.nodes = t.nodes[:0]
	return nil
}

// Moves calls move(k, path[k]) for each node of an accepted path that is
// not already in place, in order: path is ascending, so moving node
// path[k] down to k never overwrites a node still to be moved. A device
// that keeps a cache for a tree held elsewhere (the target's layers on a
// GPU) compacts it with this.
func Moves(path []int, move func(to, from int)) {
	for k, p := range path {
		if p != k {
			move(k, p)
		}
	}
}

// CheckPath verifies that path is a chain of pending nodes from a child
// of the committed positions down, each the parent of the next: what
// Commit takes.
func (t *Tree) CheckPath(path []int) error {
	for k, p := range path {
		if p < 0 || p >= len(t.nodes) {
			return fmt.Errorf("commit: node %d is not pending (%d are)", p, len(t.nodes))
		}
		want := -1
		if k > 0 {
			want = path[k-1]
		}
		if t.nodes[p].parent != want {
			return fmt.Errorf("commit: node %d's parent is %d, not %d: the path is not a chain", p, t.nodes[p].parent, want)
		}
	}
	return nil
}
