package runner

import "strings"

// stopMatcher cuts generated text at the first stop string. Text arrives in
// pieces, and a stop string can span pieces, so while streaming it holds
// back the longest tail that could still grow into a stop string: a client
// must never see any part of a stop string, not even for a moment.
type stopMatcher struct {
	stops   []string
	pending string
	done    bool
}

// add takes the next piece of text and returns what can be sent now; stop
// reports that a stop string was found (the text before it is returned, the
// rest is dropped, and later calls return nothing).
func (m *stopMatcher) add(piece string) (out string, stop bool) {
	if m.done {
		return "", true
	}
	m.pending += piece
	cut := -1
	for _, s := range m.stops {
		if i := strings.Index(m.pending, s); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		out, m.pending, m.done = m.pending[:cut], "", true
		return out, true
	}
	hold := 0
	for _, s := range m.stops {
		hold = max(hold, overlap(m.pending, s))
	}
	out = m.pending[:len(m.pending)-hold]
	m.pending = m.pending[len(m.pending)-hold:]
	return out, false
}

// flush returns the held-back text once generation has ended without a
// stop string: it can no longer become one.
func (m *stopMatcher) flush() string {
	out := m.pending
	m.pending = ""
	return out
}

// overlap is the length of the longest suffix of s that is a proper prefix
// of stop. The split it gives always falls between UTF-8 characters, since
// a prefix of stop starts with a character's first byte.
func overlap(s, stop string) int {
	for n := min(len(s), len(stop)-1); n > 0; n-- {
		if strings.HasSuffix(s, stop[:n]) {
			return n
		}
	}
	return 0
}
