package desktop

import (
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"dovetail/engine"
	"dovetail/internal/plural"
)

// Where highlighted text came from, in its colour.
var sourceColors = map[engine.Source]fyne.ThemeColorName{
	engine.FromTarget: theme.ColorNameForeground,
	engine.FromDraft:  theme.ColorNameSuccess,
	engine.FromMemory: theme.ColorNamePrimary,
}

// sourceNames are the legend's words.
var sourceNames = map[engine.Source]string{
	engine.FromTarget: "the target's own",
	engine.FromDraft:  "drafted, accepted",
	engine.FromMemory: "recalled from memory",
}

// messageView shows one message: who wrote it, its text (as written, or
// coloured by source), its actions and its statistics. Each message has a
// text widget of its own, so that streaming lays out only the message
// that streams.
type messageView struct {
	widget.BaseWidget
	msg       *Message
	highlight bool
	body      *flowText
	note      *widget.Label // what the reply's prompt left out
	who       *widget.Label
	stats     *widget.Label
	actions   *fyne.Container
	box       *fyne.Container
	// The actions' owner: copy to the clipboard, edit, regenerate.
	onCopy       func(text string)
	onEdit       func()
	onRegenerate func()
}

func newMessageView(m *Message, highlight bool, onCopy func(string), onEdit, onRegenerate func()) *messageView {
	v := &messageView{msg: m, highlight: highlight, body: newFlowText(), stats: widget.NewLabel(""),
		onCopy: onCopy, onEdit: onEdit, onRegenerate: onRegenerate}
	v.stats.TextStyle = fyne.TextStyle{Italic: true}
	v.stats.Wrapping = fyne.TextWrapWord
	v.actions = container.NewHBox()
	name := roleName(m.Role)
	if m.Completion {
		name = "Model (completion: continues your text)"
	}
	who := widget.NewLabelWithStyle(name, fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	v.who = who
	v.note = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Italic: true})
	v.note.Importance = widget.WarningImportance
	v.note.Wrapping = fyne.TextWrapWord
	v.box = container.NewVBox(container.NewBorder(nil, nil, who, v.actions), v.note, v.body, v.stats)
	v.ExtendBaseWidget(v)
	v.update(false)
	return v
}

func roleName(role string) string {
	switch role {
	case "user":
		return "You"
	case "assistant":
		return "Model"
	}
	return role
}

func (v *messageView) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(v.box)
}

// update shows the message as it is now; streaming leaves out the actions
// a finished message has.
func (v *messageView) update(streaming bool) {
	m := v.msg
	v.body.setRuns(v.runs())
	v.note.SetText(m.Note)
	v.note.Hidden = m.Note == ""
	v.stats.SetText(statsLine(m.Stats, streaming))
	v.stats.Hidden = v.stats.Text == ""
	v.actions.Objects = nil
	if !streaming {
		v.actions.Add(widget.NewButtonWithIcon("", theme.ContentCopyIcon(), func() { v.onCopy(m.Content) }))
		for i, code := range codeBlocks(m.Content) {
			v.actions.Add(widget.NewButton(fmt.Sprintf("Copy code %d", i+1), func() { v.onCopy(code) }))
		}
		if m.Role == "user" && v.onEdit != nil {
			v.actions.Add(widget.NewButtonWithIcon("Edit", theme.DocumentCreateIcon(), v.onEdit))
		}
		if m.Role == "assistant" && v.onRegenerate != nil {
			v.actions.Add(widget.NewButtonWithIcon("Regenerate", theme.ViewRefreshIcon(), v.onRegenerate))
		}
	}
	v.actions.Refresh()
	v.Refresh()
}

// runs are the message's text for the screen: a completion's prompt
// dimmed in front of it; an error (kept in conversations from before
// errors were kept out of them) in the error colour; coloured by source,
// or as written with code blocks in a fixed-width font.
func (v *messageView) runs() []flowRun {
	m := v.msg
	var out []flowRun
	if m.Prompt != "" {
		out = append(out, flowRun{Text: m.Prompt, Color: theme.ColorNamePlaceHolder})
	}
	switch {
	case m.Error != "":
		return append(out, flowRun{Text: m.Error, Color: theme.ColorNameError})
	case v.highlight && len(m.Segments) > 0:
		return append(out, highlighted(m.Segments)...)
	}
	return append(out, plainRuns(m.Content)...)
}

// highlighted is the text as runs coloured by source.
func highlighted(segs []Segment) []flowRun {
	out := make([]flowRun, 0, len(segs))
	for _, s := range segs {
		r := flowRun{Text: s.Text, Color: sourceColors[s.Source]}
		if s.Source != engine.FromTarget {
			r.Style = fyne.TextStyle{Bold: true}
		}
		out = append(out, r)
	}
	return out
}

// plainRuns is text as written, the lines of fenced code blocks in a
// fixed-width font (their fences left out).
func plainRuns(text string) []flowRun {
	var out []flowRun
	var cur strings.Builder
	code := false
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, flowRun{Text: cur.String(), Style: fyne.TextStyle{Monospace: code}})
			cur.Reset()
		}
	}
	lines := strings.SplitAfter(text, "\n")
	for _, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			flush()
			code = !code
			continue
		}
		cur.WriteString(line)
	}
	flush()
	return out
}

// statsLine is a message's statistics in words (speedline.go).
func statsLine(s *MsgStats, streaming bool) string {
	if s == nil {
		return ""
	}
	if streaming {
		return formatRate(s.TokensPerSec) + " tokens/s"
	}
	parts := []string{plural.Of(s.Tokens, "token"), formatRate(s.TokensPerSec) + " tokens/s"}
	if s.FirstTokenMs > 0 {
		parts = append(parts, "first token "+formatMs(s.FirstTokenMs))
	}
	if w := speculationWords(s); w != "" {
		parts = append(parts, w)
	}
	if s.Stopped {
		parts = append(parts, "stopped")
	}
	if s.ContextFull {
		parts = append(parts, "stopped: the context is full")
	}
	return strings.Join(parts, " · ")
}

// codeBlocks are the fenced code blocks of a markdown text.
func codeBlocks(md string) []string {
	var out []string
	var cur []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			if in {
				out = append(out, strings.Join(cur, "\n"))
				cur = nil
			}
			in = !in
			continue
		}
		if in {
			cur = append(cur, line)
		}
	}
	return out
}

// legend names the highlighting's colours.
func legend() fyne.CanvasObject {
	box := container.NewHBox()
	for _, src := range []engine.Source{engine.FromTarget, engine.FromDraft, engine.FromMemory} {
		sw := canvas.NewRectangle(theme.Color(sourceColors[src]))
		sw.SetMinSize(fyne.NewSize(12, 12))
		t := widget.NewRichText(&widget.TextSegment{Text: sourceNames[src],
			Style: widget.RichTextStyle{ColorName: sourceColors[src], Inline: true, TextStyle: fyne.TextStyle{Bold: src != engine.FromTarget}}})
		box.Add(container.NewHBox(container.NewCenter(sw), t))
	}
	return box
}
