package runner

import (
	"strings"
	"testing"
)

func TestStopMatcher(t *testing.T) {
	for _, c := range []struct {
		name   string
		stops  []string
		pieces []string
		want   []string // what each add returns, then flush's
		stop   bool
	}{
		{"no stops", nil, []string{"a", "b"}, []string{"a", "b", ""}, false},
		{"within a piece", []string{"END"}, []string{"xxENDyy"}, []string{"xx"}, true},
		{"across pieces", []string{"END"}, []string{"xE", "N", "Dy"}, []string{"x", "", ""}, true},
		{"false start released", []string{"END"}, []string{"xE", "Nz", "q"}, []string{"x", "ENz", "q", ""}, false},
		{"held tail flushed at the end", []string{"END"}, []string{"abEN"}, []string{"ab", "EN"}, false},
		{"earliest of several", []string{"bc", "ab"}, []string{"xabc"}, []string{"x"}, true},
		{"longest possible start held", []string{"aab"}, []string{"xaa"}, []string{"x", "aa"}, false},
		{"multibyte", []string{"é!"}, []string{"café", "!"}, []string{"caf", ""}, true},
		{"stop at the very start", []string{"\n"}, []string{"\nmore"}, []string{""}, true},
	} {
		m := &stopMatcher{stops: c.stops}
		var got []string
		stopped := false
		for _, p := range c.pieces {
			out, stop := m.add(p)
			got = append(got, out)
			if stop {
				stopped = true
				break
			}
		}
		if !stopped {
			got = append(got, m.flush())
		}
		if strings.Join(got, "|") != strings.Join(c.want, "|") || stopped != c.stop {
			t.Errorf("%s: got %q stop=%v, want %q stop=%v", c.name, got, stopped, c.want, c.stop)
		}
	}
}
