package desktop

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// flowRun is a run of text in one colour and style.
type flowRun struct {
	Text  string
	Color fyne.ThemeColorName
	Style fyne.TextStyle
}

// flowText shows runs of text as they are written: every newline breaks
// the line, lines wrap only at spaces, and a word whose letters come from
// runs of different colours stays one word. fyne's RichText wraps each
// segment on its own (a word of two colours breaks between them, "Mi /
// mi") and its markdown joins lines and puts spaces between the pieces
// goldmark splits text into ("happy_ day"): neither fits a model's text.
type flowText struct {
	widget.BaseWidget
	runs  []flowRun
	atoms []flowAtom
	// The layout, for width: lines of cells, each cell one canvas text.
	width, hint float32
	lines       []flowLine
}

// flowAtom is a word, a run of spaces or a newline, within one run, and
// its width.
type flowAtom struct {
	text string
	run  int
	kind atomKind
	w    float32
}

type atomKind uint8

const (
	atomWord atomKind = iota
	atomSpace
	atomBreak
)

// flowLine is one line on screen.
type flowLine struct{ cells []flowCell }

// flowCell is text of one run at x on its line.
type flowCell struct {
	text string
	run  int
	x, w float32
}

func newFlowText() *flowText {
	f := &flowText{}
	f.ExtendBaseWidget(f)
	return f
}

// setRuns replaces the text.
func (f *flowText) setRuns(runs []flowRun) {
	f.runs = runs
	f.atoms = f.atoms[:0]
	for i, r := range runs {
		f.atoms = appendAtoms(f.atoms, r.Text, i)
	}
	for i := range f.atoms {
		a := &f.atoms[i]
		if a.kind != atomBreak {
			a.w = f.measure(a.text, runs[a.run].Style)
		}
	}
	f.lines = nil
	f.Refresh()
}

// String is the text shown, the runs joined.
func (f *flowText) String() string {
	var b strings.Builder
	for _, r := range f.runs {
		b.WriteString(r.Text)
	}
	return b.String()
}

// appendAtoms cuts text into words, spaces and newlines.
func appendAtoms(out []flowAtom, text string, run int) []flowAtom {
	kindOf := func(r rune) atomKind {
		switch {
		case r == '\n':
			return atomBreak
		case unicode.IsSpace(r):
			return atomSpace
		}
		return atomWord
	}
	for len(text) > 0 {
		r, n := utf8.DecodeRuneInString(text)
		k := kindOf(r)
		if k != atomBreak {
			for n < len(text) {
				r2, m := utf8.DecodeRuneInString(text[n:])
				if kindOf(r2) != k {
					break
				}
				n += m
			}
		}
		out = append(out, flowAtom{text: strings.ReplaceAll(text[:n], "\t", "    "), run: run, kind: k})
		text = text[n:]
	}
	return out
}

func (f *flowText) textSize() float32 { return f.Theme().Size(theme.SizeNameText) }

func (f *flowText) measure(s string, style fyne.TextStyle) float32 {
	return fyne.MeasureText(s, f.textSize(), style).Width
}

func (f *flowText) padding() float32 { return f.Theme().Size(theme.SizeNameInnerPadding) }

func (f *flowText) lineHeight() float32 {
	return fyne.MeasureText("M", f.textSize(), fyne.TextStyle{}).Height
}

// layout wraps the text to width (the text's, padding excluded).
func (f *flowText) layout(width float32) {
	width = max(width, 1)
	lines := []flowLine{{}}
	x := float32(0)
	var spaces []flowAtom
	newLine := func() { lines = append(lines, flowLine{}); x = 0 }
	place := func(a flowAtom, text string, w float32) {
		l := &lines[len(lines)-1]
		n := len(l.cells)
		if n > 0 && l.cells[n-1].run == a.run {
			l.cells[n-1].text += text
			l.cells[n-1].w += w
			x += w
			return
		}
		if n > 0 {
			// Words measured one by one add up to more than the text
			// drawn as one: the next colour starts where the last ends.
			last := &l.cells[n-1]
			last.w = f.measure(last.text, f.runs[last.run].Style)
			x = last.x + last.w
		}
		l.cells = append(l.cells, flowCell{text: text, run: a.run, x: x, w: w})
		x += w
	}
	for i := 0; i < len(f.atoms); {
		a := f.atoms[i]
		switch a.kind {
		case atomBreak:
			for _, s := range spaces {
				place(s, s.text, s.w)
			}
			spaces = nil
			newLine()
			i++
			continue
		case atomSpace:
			spaces = append(spaces, a)
			i++
			continue
		}
		// A word: the atoms up to the next space or newline, whatever
		// their runs.
		j, ww := i, float32(0)
		for ; j < len(f.atoms) && f.atoms[j].kind == atomWord; j++ {
			ww += f.atoms[j].w
		}
		sw := float32(0)
		for _, s := range spaces {
			sw += s.w
		}
		if x > 0 && x+sw+ww > width {
			newLine()
			spaces = nil // the line breaks there instead
		}
		for _, s := range spaces {
			place(s, s.text, s.w)
		}
		spaces = nil
		for _, w := range f.atoms[i:j] {
			if ww <= width || x+w.w <= width {
				place(w, w.text, w.w)
				continue
			}
			f.placeLong(w, width, &x, place, newLine)
		}
		i = j
	}
	f.width, f.lines = width, lines
}

// placeLong breaks a word wider than the line between characters: the
// only way it fits.
func (f *flowText) placeLong(a flowAtom, width float32, x *float32, place func(flowAtom, string, float32), newLine func()) {
	style := f.runs[a.run].Style
	start := 0
	for i, r := range a.text {
		end := i + utf8.RuneLen(r)
		if w := f.measure(a.text[start:end], style); *x+w > width && end-start > utf8.RuneLen(r) {
			part := a.text[start:i]
			place(a, part, f.measure(part, style))
			newLine()
			start = i
		}
	}
	if part := a.text[start:]; part != "" {
		place(a, part, f.measure(part, style))
	}
}

// lineTexts are the lines as shown, for tests.
func (f *flowText) lineTexts() []string {
	var out []string
	for _, l := range f.lines {
		var b strings.Builder
		for _, c := range l.cells {
			b.WriteString(c.text)
		}
		out = append(out, b.String())
	}
	return out
}

// setWidthHint lays a new text out for width before it is first resized,
// so that a scroll to the end sees its height.
func (f *flowText) setWidthHint(w float32) {
	if f.Size().Width <= 0 && w != f.hint {
		f.hint, f.lines = w, nil
	}
}

func (f *flowText) MinSize() fyne.Size {
	f.ExtendBaseWidget(f)
	return f.BaseWidget.MinSize()
}

func (f *flowText) Resize(size fyne.Size) {
	if w := size.Width - 2*f.padding(); w != f.width || f.lines == nil {
		f.layout(w)
	}
	f.BaseWidget.Resize(size)
	f.Refresh()
}

func (f *flowText) CreateRenderer() fyne.WidgetRenderer {
	return &flowRenderer{f: f}
}

type flowRenderer struct {
	f     *flowText
	texts []*canvas.Text
	objs  []fyne.CanvasObject
}

// ensureLayout lays out at the width known: the widget's, else the hint,
// else one line per paragraph.
func (r *flowRenderer) ensureLayout() {
	f := r.f
	if f.lines != nil {
		return
	}
	w := f.Size().Width - 2*f.padding()
	if f.Size().Width <= 0 {
		w = f.hint - 2*f.padding()
	}
	if w <= 0 {
		w = 1 << 20
	}
	f.layout(w)
}

func (r *flowRenderer) MinSize() fyne.Size {
	r.ensureLayout()
	p := r.f.padding()
	return fyne.NewSize(r.f.lineHeight()+2*p, float32(len(r.f.lines))*r.f.lineHeight()+2*p)
}

func (r *flowRenderer) Layout(fyne.Size) { r.Refresh() }

func (r *flowRenderer) Refresh() {
	f := r.f
	r.ensureLayout()
	th := f.Theme()
	v := fyne.CurrentApp().Settings().ThemeVariant()
	p, lh, size := f.padding(), f.lineHeight(), f.textSize()
	n := 0
	for y, l := range f.lines {
		for _, c := range l.cells {
			if n == len(r.texts) {
				r.texts = append(r.texts, canvas.NewText("", nil))
			}
			t := r.texts[n]
			n++
			run := f.runs[c.run]
			name := run.Color
			if name == "" {
				name = theme.ColorNameForeground
			}
			t.Text, t.TextStyle, t.TextSize, t.Color = c.text, run.Style, size, th.Color(name, v)
			t.Move(fyne.NewPos(p+c.x, p+float32(y)*lh))
			t.Resize(fyne.NewSize(c.w, lh))
			t.Refresh()
		}
	}
	r.texts = r.texts[:n]
	r.objs = r.objs[:0]
	for _, t := range r.texts {
		r.objs = append(r.objs, t)
	}
}

func (r *flowRenderer) Objects() []fyne.CanvasObject { return r.objs }
func (r *flowRenderer) Destroy()                     {}
