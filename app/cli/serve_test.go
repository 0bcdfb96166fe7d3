package cli

import (
	"strings"
	"testing"
)

// Bad serve flags are usage errors (exit 2), found before the model loads.
func TestServeFlags(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--parallel", "0"},
		{"serve", "--port", "70000"},
		{"serve", "--queue", "-1"},
		{"serve", "--shutdown-grace", "-1s"},
		{"serve", "--threads", "0"},
		{"serve", "--ctx", "-5"},
		{"serve", "extra"},
		{"serve", "--nope"},
	} {
		_, errOut, code := runCLI(t, args...)
		if code != 2 || !strings.HasPrefix(errOut, "dovetail: ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}
