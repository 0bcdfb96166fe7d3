package plural

import "testing"

func TestOf(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{Of(0, "thread"), "0 threads"}, {Of(1, "thread"), "1 thread"}, {Of(2, "thread"), "2 threads"},
		{Of(-1, "thread"), "-1 thread"}, {Of(1, "memory", "memories"), "1 memory"},
		{Of(3, "memory", "memories"), "3 memories"}, {Of(2, "reply"), "2 replies"}, {Of(2, "day"), "2 days"},
		{Of(0, "target layer"), "0 target layers"}, {Of(1, "target layer"), "1 target layer"},
		{Of(32, "target layer"), "32 target layers"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}
