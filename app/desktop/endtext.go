package desktop

import "strings"

// cutEndTexts cuts a reply at the first end-of-generation text (ends):
// replies saved before the runner stopped at them end in one
// ("<|end_story|>"), and it is markup, not text.
func cutEndTexts(m *Message, ends []string) {
	if m.Role != "assistant" {
		return
	}
	cut := len(m.Content)
	for _, e := range ends {
		if i := strings.Index(m.Content, e); i >= 0 && i < cut {
			cut = i
		}
	}
	if cut == len(m.Content) {
		return
	}
	m.Content = m.Content[:cut]
	var segs []Segment
	n := 0
	for _, s := range m.Segments {
		if n+len(s.Text) > cut {
			s.Text = s.Text[:max(cut-n, 0)]
		}
		n += len(s.Text)
		if s.Text != "" {
			segs = append(segs, s)
		}
	}
	m.Segments = segs
}
