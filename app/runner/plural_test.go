package runner

import "testing"

// One layer is a layer; none and many are layers.
func TestPlural(t *testing.T) {
	for n, want := range map[int]string{0: "0 target layers", 1: "1 target layer", 2: "2 target layers", 32: "32 target layers"} {
		if got := plural(n, "target layer"); got != want {
			t.Errorf("plural(%d) = %q, want %q", n, got, want)
		}
	}
}
