package tokenizer

import "fmt"

// SentencePiece-style BPE as llama.cpp runs it (llm_tokenizer_spm): start
// from single UTF-8 characters and keep merging the adjacent pair whose
// concatenation is the vocabulary entry with the highest score, leftmost
// first on ties. Whatever is left that is not a token falls back to byte
// tokens.

type symbol struct {
	prev, next int // neighbours in the live chain, -1 at the ends
	start, n   int // byte span in the text; n == 0 once merged away
}

// splitSymbols cuts text into characters by their lead bytes, without
// validating them, and links them into a chain.
func splitSymbols(text string) []symbol {
	syms := make([]symbol, 0, len(text))
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		i := len(syms)
		syms = append(syms, symbol{prev: i - 1, next: i + 1, start: off, n: n})
		off += n
	}
	if len(syms) > 0 {
		syms[len(syms)-1].next = -1
	}
	return syms
}

func (t *Tokenizer) spmEncode(text string, out []int, lenient bool) ([]int, error) {
	syms := splitSymbols(text)
	mergeSymbols(syms, func(l, r symbol, left int) (uint64, bool) {
		id, ok := t.ids[text[l.start:r.start+r.n]]
		if !ok {
			return 0, false
		}
		return spmKey(t.scores[id], left), true
	})

	// llama.cpp also keeps a reverse-merge table to re-split symbols that are
	// not tokens, but every merged symbol is a token by construction, so only
	// unmerged characters can miss, and those go to bytes.
	for i := 0; i >= 0 && len(syms) > 0; i = syms[i].next {
		s := syms[i]
		piece := text[s.start : s.start+s.n]
		if id, ok := t.ids[piece]; ok {
			out = append(out, int(id))
			continue
		}
		mark := len(out)
		for j := 0; j < len(piece); j++ {
			id := t.byteTokens[piece[j]]
			if id != null {
				out = append(out, int(id))
				continue
			}
			if !lenient {
				return nil, fmt.Errorf("tokenizer: no token for byte 0x%02X of %q and no byte fallback in the vocabulary", piece[j], piece)
			}
			out = out[:mark]
			if t.unk != null {
				out = append(out, int(t.unk))
			}
			break
		}
	}
	return out, nil
}

// mergeSymbols merges adjacent symbols best pair first until no pair
// merges: SentencePiece by score, byte-level BPE by merge rank. key scores
// the pair l, r (l at index left), or reports that the vocabulary has no
// such merge; lower keys merge first.
func mergeSymbols(syms []symbol, key func(l, r symbol, left int) (uint64, bool)) {
	var q bigramQueue
	tryAdd := func(left, right int) {
		if left < 0 || right < 0 {
			return
		}
		l, r := syms[left], syms[right]
		if k, ok := key(l, r, left); ok {
			q.push(bigram{key: k, right: int32(right), size: int32(l.n + r.n)})
		}
	}
	for i := 1; i < len(syms); i++ {
		tryAdd(i-1, i)
	}
	for len(q) > 0 {
		b := q.pop()
		left := b.left()
		l, r := &syms[left], &syms[b.right]
		// Stale entry: one side has been merged into something else since
		// (its position is fixed, so the text is unchanged exactly when
		// the total length is).
		if l.n == 0 || r.n == 0 || l.n+r.n != int(b.size) {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = left
		}
		tryAdd(l.prev, left)
		tryAdd(left, l.next)
	}
}
