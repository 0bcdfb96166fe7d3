package tokenizer

import (
	"strconv"
	"strings"
)

// Piece is the text id stands for in output: SentencePiece's ▁ becomes a
// space and <0xNN> its byte, byte-level BPE is mapped back to raw bytes, and
// control, user-defined and unknown tokens render as their vocabulary text.
// A piece can be part of a UTF-8 sequence and so invalid on its own; use a
// StreamDecoder to print pieces as they come. Unused and undefined tokens,
// and ids outside the vocabulary, render as nothing (as in llama.cpp).
func (t *Tokenizer) Piece(id int) string {
	if !t.valid(id) {
		return ""
	}
	text, a := t.tokens[id], t.attrs[id]
	switch {
	case a&(attrUnknown|attrControl|attrUserDefined) != 0:
		return text
	case a&attrNormal != 0:
		if t.kind == kindSPM {
			return strings.ReplaceAll(text, spaceMark, " ")
		}
		return byteDecode(text)
	case a&attrByte != 0:
		// Text is "<0xNN>"; llama.cpp reads the two hex digits at 3..4.
		if len(text) >= 5 {
			if b, err := strconv.ParseUint(text[3:5], 16, 8); err == nil {
				return string([]byte{byte(b)})
			}
		}
	}
	return ""
}

// Decode joins the pieces of ids, skipping nothing. With SentencePiece's
// prefix space (add_space_prefix), the one leading space Encode adds to each
// run of text that starts the input or follows a special token is removed
// again, so Decode(Encode(s, ...)) == s; llama.cpp's detokenize only strips
// it from the very first token. Byte-level BPE text is returned as is: no
// clean_up_tokenization_spaces, which would not round-trip.
func (t *Tokenizer) Decode(ids []int) string {
	var sb strings.Builder
	prevSpecial := true
	for _, id := range ids {
		p := t.Piece(id)
		special := t.valid(id) && t.attrs[id]&(attrUnknown|attrControl|attrUserDefined) != 0
		if t.kind == kindSPM && t.addSpacePrefix && prevSpecial && !special {
			p = strings.TrimPrefix(p, " ")
		}
		sb.WriteString(p)
		prevSpecial = special
	}
	return sb.String()
}
