package desktop

import (
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"
)

func TestSentenceCase(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{sentenceCase("no model loaded"), "No model loaded"}, {sentenceCase("τ now"), "τ now"}, {sentenceCase(""), ""},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
}

// shownText is a text on screen and what shows it.
type shownText struct {
	text  string
	label bool // a label, button, title or placeholder: sentence case
}

// screenTexts walks what o shows: the words of its labels, buttons,
// checks, cards, forms, accordions, tabs, placeholders, progress bars and
// drawn text, hidden ones too (a problem line shows later). The raw
// error behind a "Details" expander is left out, as are a message's body
// and the pickers' choices: the user's and the models' words, not the
// app's.
func screenTexts(o fyne.CanvasObject) []shownText { return walkTexts(o, false) }

// walkTexts is screenTexts; inMessage: o is part of a message, whose
// rich text is its body.
func walkTexts(o fyne.CanvasObject, inMessage bool) []shownText {
	screenTexts := func(o fyne.CanvasObject) []shownText { return walkTexts(o, inMessage) }
	var out []shownText
	add := func(label bool, ts ...string) {
		for _, t := range ts {
			if strings.TrimSpace(t) != "" {
				out = append(out, shownText{t, label})
			}
		}
	}
	switch w := o.(type) {
	case nil:
	case *fyne.Container:
		for _, c := range w.Objects {
			out = append(out, screenTexts(c)...)
		}
	case *container.Scroll:
		out = append(out, screenTexts(w.Content)...)
	case *container.AppTabs:
		for _, it := range w.Items {
			add(true, it.Text)
			out = append(out, screenTexts(it.Content)...)
		}
	case *widget.Label:
		add(true, w.Text)
	case *widget.Check:
		add(true, w.Text)
	case *widget.Button:
		add(true, w.Text)
	case *widget.Entry:
		add(true, w.PlaceHolder)
	case *widget.Select:
		add(true, w.PlaceHolder)
	case *widget.Card:
		add(true, w.Title, w.Subtitle)
		out = append(out, screenTexts(w.Content)...)
	case *widget.Form:
		for _, it := range w.Items {
			add(true, it.Text, it.HintText)
			out = append(out, screenTexts(it.Widget)...)
		}
	case *widget.Accordion:
		for _, it := range w.Items {
			add(true, it.Title)
			if it.Title != "Details" { // the error as the program had it: asked for
				out = append(out, screenTexts(it.Detail)...)
			}
		}
	case *widget.ProgressBar:
		if w.TextFormatter != nil {
			add(true, w.TextFormatter())
		}
	case *canvas.Text:
		add(true, w.Text)
	case *widget.RichText:
		if !inMessage { // the colours' legend: words inside a line, not labels
			for _, seg := range w.Segments {
				if t, ok := seg.(*widget.TextSegment); ok {
					add(false, t.Text)
				}
			}
		}
	case *flowText: // a message's text, the user's and the model's words as written
	case *messageView:
		for _, c := range test.WidgetRenderer(w).Objects() {
			out = append(out, walkTexts(c, true)...)
		}
	case *widget.List, *widget.Icon, *widget.ProgressBarInfinite, *canvas.Rectangle, *canvas.Line:
	case fyne.Widget: // the app's own widgets: what their renderers draw
		for _, c := range test.WidgetRenderer(w).Objects() {
			out = append(out, screenTexts(c)...)
		}
	}
	return out
}

var (
	lowerDevice = regexp.MustCompile(`\b(cpu|gpu|Cpu|Gpu)s?\b`)
	oneMany     = regexp.MustCompile(`(^|[^\d.,])1 \pL+[^su\W]s\b`)
	modelName   = regexp.MustCompile(`^[a-z0-9][\w.\-/]*:[\w.\-]+$`) // qwen2.5:3b: a name as written, not a label
	rawError    = regexp.MustCompile(`\bstat |no such file|: open |permission denied|%!|\(s\)|\bnil\b|<nil>`)
)

// wordProblems are the ways a text breaks the app's rules for words.
func wordProblems(s shownText) []string {
	var out []string
	if strings.Contains(s.text, "(s)") {
		out = append(out, "a plural with (s)")
	}
	if m := lowerDevice.FindString(s.text); m != "" {
		out = append(out, "lower-case "+m)
	}
	if m := oneMany.FindString(s.text); m != "" {
		out = append(out, "one with a plural: "+strings.TrimSpace(m))
	}
	if m := rawError.FindString(s.text); m != "" && m != "(s)" {
		out = append(out, "a raw error: "+m)
	}
	if r, _ := utf8.DecodeRuneInString(s.text); s.label && unicode.IsLower(r) && !strings.ContainsRune("τγ", r) && !modelName.MatchString(s.text) {
		out = append(out, "not sentence case")
	}
	return out
}

// The rules catch what the issue found.
func TestWordProblemsCatch(t *testing.T) {
	for _, bad := range []string{"calibrated 1 model(s)", "CPU and cpu", "2 GPUs, 1 gpu", "1 threads", "τ: 0.8 (1 requests)",
		"models: stat : no such file or directory", "no model loaded"} {
		if len(wordProblems(shownText{bad, true})) == 0 {
			t.Errorf("%q passes", bad)
		}
	}
	for _, good := range []string{"Calibrated 1 model", "1 thread, 2 threads", "CPU threads", "Step 1 of 4", "τ now 0.80", "1.5 tokens/s", "0.1 GiB",
		"Weights 1 MiB", "1 process", "12 tokens · 1 round", "First token 1 ms"} {
		if p := wordProblems(shownText{good, true}); len(p) > 0 {
			t.Errorf("%q: %v", good, p)
		}
	}
}
