package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Codepoint classes as llama.cpp's unicode-data.cpp assigns them. Each
// assigned codepoint has exactly one category; whitespace is a separate flag.
// llama.cpp generated its table from Unicode 15.1 while Go ships 15.0, so the
// few codepoints 15.1 added are patched in by hand in cptCategory.
type cptCategory uint8

const (
	catUndefined cptCategory = iota // unassigned, or outside Unicode
	catNumber                       // \p{N}
	catLetter                       // \p{L}
	catSeparator                    // \p{Z}
	catMark                         // \p{M}
	catPunct                        // \p{P}
	catSymbol                       // \p{S}
	catControl                      // \p{C} (assigned ones)
)

const maxCodepoint = 0x110000

var asciiCategory [128]cptCategory

func init() {
	for c := rune(0); c < 128; c++ {
		asciiCategory[c] = categoryOf(c)
	}
}

func categoryOf(c rune) cptCategory {
	switch {
	case c < 0 || c >= maxCodepoint:
		return catUndefined
	case unicode.Is(unicode.L, c):
		return catLetter
	case unicode.Is(unicode.N, c):
		return catNumber
	case unicode.Is(unicode.Z, c):
		return catSeparator
	case unicode.Is(unicode.M, c):
		return catMark
	case unicode.Is(unicode.P, c):
		return catPunct
	case unicode.Is(unicode.S, c):
		return catSymbol
	case unicode.Is(unicode.C, c):
		return catControl
	}
	// Unicode 15.1 additions missing from Go's 15.0 tables.
	switch {
	case c >= 0x2EBF0 && c <= 0x2EE5D: // CJK Unified Ideographs Extension I
		return catLetter
	case c >= 0x2FFC && c <= 0x2FFF, c == 0x31EF: // ideographic description characters
		return catSymbol
	}
	return catUndefined
}

// category is categoryOf with a fast path for ASCII, the common case.
func category(c rune) cptCategory {
	if c >= 0 && c < 128 {
		return asciiCategory[c]
	}
	return categoryOf(c)
}

// isWhitespace is Python regex's \s, the set llama.cpp's tables carry. It
// differs from Go's unicode.IsSpace: U+001C..U+001F are not in it.
func isWhitespace(c rune) bool {
	switch c {
	case 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x20, 0x85, 0xA0, 0x1680,
		0x2028, 0x2029, 0x202F, 0x205F, 0x3000:
		return true
	}
	return c >= 0x2000 && c <= 0x200A
}

// cptFlags is the per-codepoint summary the hand-written splitters need.
// outside reports a position past the fragment, which llama.cpp models as
// all-zero flags (so it matches no class at all).
type cptFlags struct {
	cat        cptCategory
	whitespace bool
	outside    bool
}

func flagsOf(c rune) cptFlags { return cptFlags{cat: category(c), whitespace: isWhitespace(c)} }

func (f cptFlags) letter() bool { return !f.outside && f.cat == catLetter }
func (f cptFlags) number() bool { return !f.outside && f.cat == catNumber }

// decodeCodepoints splits text the way llama.cpp's unicode_cpts_from_utf8
// does. It is more lenient than Go's decoder (overlong forms and surrogates
// pass, only the continuation-byte pattern is checked) and maps each byte it
// cannot decode to U+FFFD. Codepoints above U+10FFFF can come out of a 4-byte
// form; llama.cpp fails the whole call on them, so the caller must check.
func decodeCodepoints(s string) []rune {
	out := make([]rune, 0, len(s))
	for i := 0; i < len(s); {
		c, n := decodeLenient(s, i)
		out = append(out, c)
		i += n
	}
	return out
}

func decodeLenient(s string, i int) (rune, int) {
	b0 := s[i]
	cont := func(k int) bool { return i+k < len(s) && s[i+k]&0xC0 == 0x80 }
	switch {
	case b0 < 0x80:
		return rune(b0), 1
	case b0&0x40 == 0:
		return utf8.RuneError, 1
	case b0&0x20 == 0:
		if cont(1) {
			return rune(b0&0x1F)<<6 | rune(s[i+1]&0x3F), 2
		}
	case b0&0x10 == 0:
		if cont(1) && cont(2) {
			return rune(b0&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F), 3
		}
	case b0&0x08 == 0:
		if cont(1) && cont(2) && cont(3) {
			return rune(b0&0x07)<<18 | rune(s[i+1]&0x3F)<<12 | rune(s[i+2]&0x3F)<<6 | rune(s[i+3]&0x3F), 4
		}
	}
	return utf8.RuneError, 1
}

// appendCodepoint encodes c without Go's validity checks, so that surrogates
// and overlong input round-trip byte-for-byte as they do in llama.cpp.
func appendCodepoint(b []byte, c rune) []byte {
	switch {
	case c < 0x80:
		return append(b, byte(c))
	case c < 0x800:
		return append(b, 0xC0|byte(c>>6), 0x80|byte(c)&0x3F)
	case c < 0x10000:
		return append(b, 0xE0|byte(c>>12), 0x80|byte(c>>6)&0x3F, 0x80|byte(c)&0x3F)
	}
	return append(b, 0xF0|byte(c>>18)&0x07, 0x80|byte(c>>12)&0x3F, 0x80|byte(c>>6)&0x3F, 0x80|byte(c)&0x3F)
}

// utf8Len is the sequence length llama.cpp reads off a lead byte without
// validating it; SPM and BPE both cut symbols with it.
func utf8Len(b byte) int {
	switch b >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}
