package desktop

import (
	"slices"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
)

// Text wraps only at spaces, at every width: a word whose letters come
// from two runs ("Mi" + "mi") stays whole on one line, lines hold no
// space the text does not, newlines and blank lines stay, and no line
// is wider than the width unless one word is.
func TestFlowTextWrapsAtWords(t *testing.T) {
	test.NewTempApp(t)
	text := []flowRun{{Text: "Once upon a time, there was a little girl who went to the big park with Mi"}, {Text: "mi", Color: theme.ColorNameSuccess, Style: fyne.TextStyle{Bold: true}},
		{Text: " went to the park_day with her mom's dog.\n\nThe end.\nBye"}}
	f := newFlowText()
	f.setRuns(text)
	var all string
	for _, r := range text {
		all += r.Text
	}
	paragraphs := strings.Split(all, "\n")
	for _, w := range []float32{70, 110, 160, 260, 2000} {
		f.Resize(fyne.NewSize(w+2*f.padding(), 400))
		lines := f.lineTexts()
		// Lines between newlines, joined at the spaces they broke at, give
		// the text back.
		var got []string
		var para []string
		for i, l := range lines {
			para = append(para, l)
			if i == len(lines)-1 || f.lines[i+1].cells == nil || lineStartsParagraph(lines, paragraphs, i+1) {
				got = append(got, strings.Join(para, " "))
				para = nil
			}
		}
		if !slices.Equal(got, paragraphs) {
			t.Errorf("width %.0f: lines %q", w, lines)
		}
		mimi := false
		for i, l := range f.lines {
			mimi = mimi || strings.Contains(lines[i], "Mimi")
			for j := 1; j < len(l.cells); j++ {
				a, b := l.cells[j-1], l.cells[j]
				if drawn := f.measure(a.text, f.runs[a.run].Style); b.x != a.x+a.w || a.w != drawn {
					t.Errorf("width %.0f: %q drawn %.1f wide ends at %.1f, %q starts at %.1f", w, a.text, drawn, a.x+a.w, b.text, b.x)
				}
			}
			if n := len(l.cells); n > 0 && l.cells[n-1].x+l.cells[n-1].w > w && strings.Contains(lines[i], " ") {
				t.Errorf("width %.0f: line %q is wider", w, lines[i])
			}
		}
		if !mimi {
			t.Errorf("width %.0f: \"Mimi\" is broken: %q", w, lines)
		}
	}
}

// lineStartsParagraph: line i begins one of the text's paragraphs (with
// the words in order, the only ambiguity is a repeated line, which this
// text has none of).
func lineStartsParagraph(lines, paragraphs []string, i int) bool {
	for _, p := range paragraphs[1:] {
		if lines[i] == p || (p != "" && strings.HasPrefix(p, lines[i]+" ")) || (p == "" && lines[i] == "") {
			return true
		}
	}
	return false
}
