package runner

import (
	"testing"
	"time"
)

// Plain speed takes 64 tokens a generation of a small model, and about a
// second's worth, never under 8, of a large one.
func TestPlainTokens(t *testing.T) {
	for _, c := range []struct {
		tt   time.Duration
		want int
	}{
		{0, 64},
		{70 * time.Microsecond, 64},
		{15 * time.Millisecond, 64},
		{20 * time.Millisecond, 50},
		{100 * time.Millisecond, 10},
		{300 * time.Millisecond, 8},
		{5 * time.Second, 8},
	} {
		if got := plainTokens(c.tt); got != c.want {
			t.Errorf("T_T %v: %d tokens, want %d", c.tt, got, c.want)
		}
	}
}
