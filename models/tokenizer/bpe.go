package tokenizer

import (
	"fmt"
	"strings"

	"dovetail/models/gguf"
)

// Byte-level BPE as llama.cpp runs it (llm_tokenizer_bpe): pre-tokenize into
// words, map each word's bytes to GPT-2's printable codepoints, then merge
// adjacent symbols by merge rank (lowest first, leftmost on ties).

type mergePair struct{ left, right string }

func (t *Tokenizer) loadMerges(f *gguf.File) error {
	merges, ok := f.Strings(keyPrefix + "merges")
	if !ok {
		return fmt.Errorf("tokenizer: model %q needs the string array tokenizer.ggml.merges", "gpt2")
	}
	t.merges = make(map[mergePair]int32, len(merges))
	for i, m := range merges {
		// Split at the first space after the first byte, so that a merge
		// whose left side is a space itself still parses; a line without one
		// becomes the pair ("", ""), as in llama.cpp.
		var p mergePair
		if len(m) > 1 {
			if j := strings.IndexByte(m[1:], ' '); j >= 0 {
				p = mergePair{m[:j+1], m[j+2:]}
			}
		}
		// The first rank given to a pair wins.
		if _, dup := t.merges[p]; !dup {
			t.merges[p] = int32(i)
		}
	}
	return nil
}

func (t *Tokenizer) bpeEncode(text string, out []int, lenient bool) ([]int, error) {
	cpts := decodeCodepoints(text)
	for i, c := range cpts {
		if c >= maxCodepoint {
			// llama.cpp cannot re-encode these and fails the call.
			if !lenient {
				return nil, fmt.Errorf("tokenizer: invalid codepoint U+%X in input", c)
			}
			cpts[i] = 0xFFFD
		}
	}
	var buf []byte
	for _, w := range t.splitter.split(cpts) {
		buf = buf[:0]
		for _, c := range w {
			buf = appendCodepoint(buf, c)
		}
		out = t.bpeWord(byteEncode(buf), out)
	}
	return out, nil
}

func (t *Tokenizer) bpeWord(word string, out []int) []int {
	if word == "" {
		return out
	}
	if t.ignoreMerges {
		if id, ok := t.ids[word]; ok {
			return append(out, int(id))
		}
	}
	syms := splitSymbols(word)
	mergeSymbols(syms, func(l, r symbol, left int) (uint64, bool) {
		rank, ok := t.merges[mergePair{word[l.start : l.start+l.n], word[r.start : r.start+r.n]}]
		if !ok {
			return 0, false
		}
		return bpeKey(rank, left), true
	})
	for i := 0; i >= 0; i = syms[i].next {
		s := syms[i]
		piece := word[s.start : s.start+s.n]
		if id, ok := t.ids[piece]; ok {
			out = append(out, int(id))
			continue
		}
		// A symbol that is not a token is spelled byte by byte, each byte
		// looked up as a one-byte string; bytes with no such token are
		// dropped, as in llama.cpp.
		for j := 0; j < len(piece); j++ {
			if id, ok := t.ids[piece[j:j+1]]; ok {
				out = append(out, int(id))
			}
		}
	}
	return out
}
