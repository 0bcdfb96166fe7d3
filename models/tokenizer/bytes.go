package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

// GPT-2's byte-level BPE never sees raw bytes: every byte is first replaced by
// a printable codepoint (bytes_to_unicode in OpenAI's encoder.py), so that
// vocabulary entries are readable strings without spaces or control chars.
var (
	byteToRune [256]rune
	byteToStr  [256]string
	runeToByte = map[rune]byte{}
)

func init() {
	printable := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !printable(b) {
			r = rune(256 + n)
			n++
		}
		byteToRune[b] = r
		byteToStr[b] = string(r)
		runeToByte[r] = byte(b)
	}
}

// byteEncode maps each byte of s to its GPT-2 codepoint.
func byteEncode(s []byte) string {
	out := make([]byte, 0, len(s)*2)
	for _, b := range s {
		out = utf8.AppendRune(out, byteToRune[b])
	}
	return string(out)
}

// byteDecode undoes byteEncode on a vocabulary entry. A codepoint outside the
// mapping cannot come from byte-level text; llama.cpp renders it as an
// "[UNK_BYTE_0x..]" marker rather than failing, and so does this.
func byteDecode(tok string) string {
	out := make([]byte, 0, len(tok))
	for _, c := range decodeCodepoints(tok) {
		if b, ok := runeToByte[c]; ok {
			out = append(out, b)
			continue
		}
		out = append(out, "[UNK_BYTE_0x"...)
		for _, b := range appendCodepoint(nil, c) {
			out = fmt.Appendf(out, "%02x", b)
		}
		out = append(out, tok...)
		out = append(out, ']')
	}
	return string(out)
}
