// Package plural puts a count and its noun into words, one way for the
// runner's messages and the desktop app alike.
package plural

import (
	"fmt"
	"strings"
)

// Of is a count with its noun, singular for one: Of(1, "thread") is "1
// thread", Of(4, "thread") "4 threads", Of(2, "reply") "2 replies"; a
// noun whose plural is none of those gives it: Of(2, "child",
// "children").
func Of(n int, one string, many ...string) string {
	noun := one + "s"
	if stem, ok := strings.CutSuffix(one, "y"); ok && !strings.HasSuffix(stem, "a") && !strings.HasSuffix(stem, "e") && !strings.HasSuffix(stem, "o") {
		noun = stem + "ies"
	}
	if len(many) > 0 {
		noun = many[0]
	}
	if n == 1 || n == -1 {
		noun = one
	}
	return fmt.Sprintf("%d %s", n, noun)
}
