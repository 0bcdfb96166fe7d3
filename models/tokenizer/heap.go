package tokenizer

import "math"

// bigram is a candidate merge of the adjacent symbols left and right. Both
// tokenizers pop the best candidate first and break ties by the leftmost
// position; folding that order into one integer key keeps the heap's
// comparisons cheap, which matters since merging is most of the work.
type bigram struct {
	key   uint64 // lower pops first; the low 32 bits are the left symbol
	right int32
	size  int32 // byte length of the merged text when queued
}

func (b bigram) left() int { return int(uint32(b.key)) }

// spmKey orders by score, highest first.
func spmKey(score float32, left int) uint64 {
	if score == 0 {
		score = 0 // -0 and +0 compare equal in llama.cpp's comparator
	}
	bits := math.Float32bits(score)
	if bits&0x80000000 != 0 {
		bits = ^bits
	} else {
		bits |= 0x80000000
	}
	// bits now grows with score; invert it so that higher scores pop first.
	return uint64(^bits)<<32 | uint64(uint32(left))
}

// bpeKey orders by merge rank, lowest first.
func bpeKey(rank int32, left int) uint64 {
	return uint64(uint32(rank))<<32 | uint64(uint32(left))
}

// bigramQueue is a binary min-heap on key.
type bigramQueue []bigram

func (q *bigramQueue) push(x bigram) {
	h := append(*q, x)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if h[i].key >= h[p].key {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	*q = h
}

func (q *bigramQueue) pop() bigram {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		m := i
		if l := 2*i + 1; l < n && h[l].key < h[m].key {
			m = l
		}
		if r := 2*i + 2; r < n && h[r].key < h[m].key {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}
