package adapt

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"dovetail/models/draft"
)

// Records is the adaptation buffer: for every position the target
// committed, its token and final hidden state, exactly what the draft
// trains on (input f_t with token x_{t+1}, target f_{t+1}). Nothing here
// costs an extra target forward: the features come from verification and
// prefill. It is a ring bounded in bytes: the oldest positions go first.
// Positions of one sequence stay in order, so the trainer can take windows
// of consecutive positions; one decoder writes while one trainer reads.
type Records struct {
	mu     sync.Mutex
	hidden int
	cap    int       // positions
	feats  []float32 // cap × hidden
	toks   []int32
	seqs   []uint64
	start  int // oldest position in the ring
	n      int
	total  uint64 // positions ever appended

	br branchRing // rejected tree nodes (Aurora), when kept
}

// RecordBytes is the memory one position takes.
func RecordBytes(hidden int) int { return 4*hidden + 4 + 8 }

// NewRecords holds at most maxBytes of positions of features of size
// hidden.
func NewRecords(hidden, maxBytes int) (*Records, error) {
	c := maxBytes / RecordBytes(hidden)
	if hidden <= 0 || c < 2 {
		return nil, fmt.Errorf("records: %d bytes hold no window of %d-wide features", maxBytes, hidden)
	}
	return &Records{hidden: hidden, cap: c, feats: make([]float32, c*hidden), toks: make([]int32, c), seqs: make([]uint64, c)}, nil
}

// Append adds consecutive positions of sequence seq and returns the
// number (counted over all positions ever appended) of the first.
func (r *Records) Append(seq uint64, tokens []int, features [][]float32) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	first := r.total
	for i, tok := range tokens {
		at := ringPush(&r.start, &r.n, r.cap)
		copy(r.feats[at*r.hidden:(at+1)*r.hidden], features[i])
		r.toks[at] = int32(tok)
		r.seqs[at] = seq
		r.total++
	}
	return first
}

// Len is the number of positions held.
func (r *Records) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Total is the number of positions ever appended.
func (r *Records) Total() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total
}

// Bytes is the memory the ring holds (its bound).
func (r *Records) Bytes() int { return r.cap * RecordBytes(r.hidden) }

// Window is consecutive positions of one sequence (see draft.Window);
// Records hands out copies, as the ring overwrites its own.
type Window = draft.Window

// Sample copies up to count windows of length positions each, from random
// places in the ring, preferring recent positions when recent is set (the
// newest half). Windows never cross sequences.
func (r *Records) Sample(rng *rand.Rand, count, length int, recent bool) []Window {
	r.mu.Lock()
	n := r.n
	r.mu.Unlock()
	lo := 0
	if recent {
		lo = n / 2
	}
	return r.SampleSpan(rng, count, length, lo, n)
}

// SampleSpan copies up to count windows of length positions each from
// positions [lo, hi) of the ring, counted from the oldest it holds (so
// [Len()−k, Len()) are the newest k). Windows never cross sequences.
func (r *Records) SampleSpan(rng *rand.Rand, count, length, lo, hi int) []Window {
	r.mu.Lock()
	defer r.mu.Unlock()
	lo, hi = max(lo, 0), min(hi, r.n)
	if length < 1 || hi-lo < length {
		return nil
	}
	var out []Window
	for tries := 0; len(out) < count && tries < 4*count; tries++ {
		first := lo + rng.IntN(hi-length+1-lo)
		seq := r.seqs[(r.start+first)%r.cap]
		if r.seqs[(r.start+first+length-1)%r.cap] != seq {
			continue
		}
		w := Window{Tokens: make([]int, length), Features: make([][]float32, length)}
		for i := range length {
			at := (r.start + first + i) % r.cap
			w.Tokens[i] = int(r.toks[at])
			w.Features[i] = append([]float32(nil), r.feats[at*r.hidden:(at+1)*r.hidden]...)
		}
		out = append(out, w)
	}
	return out
}

// HoldOut splits the ring for evaluation: it returns the index from which
// the newest whole sequences hold at least min positions, so that a
// trainer can train on [0, i) and score on [i, Len()) text it has never
// seen any of (windows of one request resemble each other: held-out
// windows beside trained ones flatter the trainer). With fewer than two
// sequences it splits at Len()−min.
func (r *Records) HoldOut(min int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == 0 {
		return 0
	}
	i := r.n - 1
	for i >= 0 {
		seq := r.seqs[(r.start+i)%r.cap]
		for i >= 0 && r.seqs[(r.start+i)%r.cap] == seq {
			i--
		}
		if r.n-(i+1) >= min {
			break
		}
	}
	if i < 0 {
		// Every sequence was needed (or there is one): split inside.
		return max(0, r.n-min)
	}
	return i + 1
}

// ringPush returns the slot for a new entry of a ring of cap entries, the
// oldest at start, n held: the next free one, or the oldest, which it
// evicts.
func ringPush(start, n *int, cap int) int {
	at := (*start + *n) % cap
	if *n == cap {
		*start = (*start + 1) % cap
	} else {
		*n++
	}
	return at
}
