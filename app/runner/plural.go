package runner

import "fmt"

// plural is a count with its noun, singular for one: plural(1, "target
// layer") is "1 target layer", plural(4, "target layer") "4 target
// layers" (as the desktop's plural, for the runner's messages).
func plural(n int, one string) string {
	if n == 1 || n == -1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %ss", n, one)
}
