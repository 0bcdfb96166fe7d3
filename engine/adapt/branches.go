package adapt

import (
	"errors"
	"math/rand/v2"
)

// The branches of Records are the nodes of verified trees that the target
// did not commit (Aurora's rejected branches). Verification computed the
// target's final hidden state at every node, so each rejected node is one
// more position of the target's own behaviour, on a continuation the draft
// thought likely, at no extra target cost: a round of the default tree
// commits about 4 positions and rejects about 12. A node is kept with its
// parent, either the committed position its path leaves the text at (its
// anchor) or an earlier rejected node, so that a training window can run
// from the committed text down the node's path.

// branchRing holds rejected nodes, oldest first, bounded like the main
// ring. Numbers are absolute (counted over everything ever appended).
type branchRing struct {
	cap    int
	feats  []float32 // cap × hidden
	toks   []int32
	anchor []uint64 // the committed position the path leaves the text at
	parent []int64  // the rejected parent's number, or −1: the anchor is the parent
	start  int
	n      int
	total  uint64
}

// BranchBytes is the memory one kept rejected node takes.
func BranchBytes(hidden int) int { return 4*hidden + 4 + 8 + 8 }

// KeepBranches makes the records keep rejected nodes too, at most maxBytes
// of them.
func (r *Records) KeepBranches(maxBytes int) error {
	c := maxBytes / BranchBytes(r.hidden)
	if c < 1 {
		return errors.New("records: no room for a rejected node")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.br = branchRing{cap: c, feats: make([]float32, c*r.hidden), toks: make([]int32, c),
		anchor: make([]uint64, c), parent: make([]int64, c)}
	return nil
}

// Branches is the number of rejected nodes held.
func (r *Records) Branches() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.br.n
}

// AppendBranches keeps the rejected nodes of a verified tree: nodes[0] is
// the root, parents[i] the index of node i's parent (−1 for the root, and
// parents come first), features[i] the target's hidden state at node i,
// and path the indices of the committed nodes, which Append numbered from
// first on. It returns how many it kept (none unless KeepBranches was
// called).
func (r *Records) AppendBranches(first uint64, nodes, parents []int, features [][]float32, path []int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := &r.br
	if b.cap == 0 || len(nodes) != len(parents) || len(nodes) != len(features) {
		return 0
	}
	// kept[i]: node i's number in the branch ring, −1 if not kept;
	// anchorOf[i]: the committed position node i's path leaves the text at.
	kept := make([]int64, len(nodes))
	anchorOf := make([]uint64, len(nodes))
	onPath := make([]bool, len(nodes))
	for i, v := range path {
		if v >= 0 && v < len(nodes) {
			onPath[v] = true
			anchorOf[v] = first + uint64(i)
		}
	}
	count := 0
	for v := range nodes {
		kept[v] = -1
		p := parents[v]
		if onPath[v] || p < 0 || p >= v {
			continue
		}
		parent := int64(-1)
		if !onPath[p] {
			if kept[p] < 0 {
				continue
			}
			parent = kept[p]
		}
		at := ringPush(&b.start, &b.n, b.cap)
		copy(b.feats[at*r.hidden:(at+1)*r.hidden], features[v])
		b.toks[at] = int32(nodes[v])
		b.anchor[at] = anchorOf[p]
		b.parent[at] = parent
		anchorOf[v], kept[v] = anchorOf[p], int64(b.total)
		b.total++
		count++
	}
	return count
}

// SampleBranches copies up to count windows of at most length positions
// that end in a rejected node whose anchor lies in positions [lo, hi) of
// the main ring (counted as in SampleSpan): the committed text up to the
// anchor, then the rejected path down to the node. Windows never cross
// sequences; one whose node or any of its path was evicted is not made.
func (r *Records) SampleBranches(rng *rand.Rand, count, length, lo, hi int) []Window {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := &r.br
	lo, hi = max(lo, 0), min(hi, r.n)
	if b.n == 0 || length < 2 || hi <= lo {
		return nil
	}
	oldest, oldestBranch := r.total-uint64(r.n), b.total-uint64(b.n)
	var out []Window
	var chain []int // ring slots, node first
	for tries := 0; len(out) < count && tries < 8*count; tries++ {
		chain = chain[:0]
		num := int64(oldestBranch) + int64(rng.IntN(b.n))
		for num >= 0 && len(chain) < length {
			if uint64(num) < oldestBranch {
				chain = chain[:0] // an evicted ancestor
				break
			}
			at := (b.start + int(uint64(num)-oldestBranch)) % b.cap
			chain = append(chain, at)
			num = b.parent[at]
		}
		if len(chain) == 0 || len(chain) >= length || num >= 0 {
			continue
		}
		a := b.anchor[chain[0]]
		if a < oldest || a >= r.total {
			continue
		}
		rel := int(a - oldest)
		if rel < lo || rel >= hi {
			continue
		}
		seq := r.seqs[(r.start+rel)%r.cap]
		from := rel
		for from > 0 && rel-from+1 < length-len(chain) && r.seqs[(r.start+from-1)%r.cap] == seq {
			from--
		}
		w := Window{}
		for i := from; i <= rel; i++ {
			at := (r.start + i) % r.cap
			w.Tokens = append(w.Tokens, int(r.toks[at]))
			w.Features = append(w.Features, append([]float32(nil), r.feats[at*r.hidden:(at+1)*r.hidden]...))
		}
		for i := len(chain) - 1; i >= 0; i-- {
			at := chain[i]
			w.Tokens = append(w.Tokens, int(b.toks[at]))
			w.Features = append(w.Features, append([]float32(nil), b.feats[at*r.hidden:(at+1)*r.hidden]...))
		}
		out = append(out, w)
	}
	return out
}
