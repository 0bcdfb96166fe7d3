package desktop

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// plural is a count with its noun, singular for one: plural(1, "thread")
// is "1 thread", plural(4, "thread") "4 threads"; a noun whose plural is
// not the singular and an s gives it: plural(2, "memory", "memories").
func plural(n int, one string, many ...string) string {
	noun := one + "s"
	if len(many) > 0 {
		noun = many[0]
	}
	if n == 1 || n == -1 {
		noun = one
	}
	return fmt.Sprintf("%d %s", n, noun)
}

// sentenceCase starts s with a capital, as labels and lines do.
func sentenceCase(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if n == 0 || unicode.IsUpper(r) {
		return s
	}
	return string(unicode.ToUpper(r)) + s[n:]
}
