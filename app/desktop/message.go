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

// messageView shows one message: who wrote it, its text (markdown, or
// highlighted by source), its actions and its statistics. Each message has
// a rich-text widget of its own, so that streaming re-parses only the
// message that streams.
type messageView struct {
	widget.BaseWidget
	msg       *Message
	highlight bool
	body      *widget.RichText
	stats     *widget.Label
	actions   *fyne.Container
	box       *fyne.Container
	// The actions' owner: copy to the clipboard, edit, regenerate.
	onCopy       func(text string)
	onEdit       func()
	onRegenerate func()
}

func newMessageView(m *Message, highlight bool, onCopy func(string), onEdit, onRegenerate func()) *messageView {
	v := &messageView{msg: m, highlight: highlight, body: widget.NewRichText(), stats: widget.NewLabel(""),
		onCopy: onCopy, onEdit: onEdit, onRegenerate: onRegenerate}
	v.body.Wrapping = fyne.TextWrapWord
	v.stats.TextStyle = fyne.TextStyle{Italic: true}
	v.stats.Wrapping = fyne.TextWrapWord
	v.actions = container.NewHBox()
	who := widget.NewLabelWithStyle(roleName(m.Role), fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	v.box = container.NewVBox(container.NewBorder(nil, nil, who, v.actions), v.body, v.stats)
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
	switch {
	case m.Error != "":
		v.body.Segments = []widget.RichTextSegment{&widget.TextSegment{Text: m.Error,
			Style: widget.RichTextStyle{ColorName: theme.ColorNameError, Inline: true}}}
	case v.highlight && len(m.Segments) > 0:
		v.body.Segments = highlighted(m.Segments)
	default:
		v.body.ParseMarkdown(m.Content)
	}
	v.body.Refresh()
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

// highlighted is the text as segments coloured by source.
func highlighted(segs []Segment) []widget.RichTextSegment {
	out := make([]widget.RichTextSegment, 0, len(segs))
	for _, s := range segs {
		style := widget.RichTextStyle{ColorName: sourceColors[s.Source], Inline: true}
		if s.Source != engine.FromTarget {
			style.TextStyle = fyne.TextStyle{Bold: true}
		}
		// A newline inside inline text breaks the line: one segment per
		// line, an empty paragraph between.
		lines := strings.Split(s.Text, "\n")
		for i, line := range lines {
			if i > 0 {
				out = append(out, &widget.TextSegment{Text: "", Style: widget.RichTextStyleParagraph})
			}
			if line != "" {
				out = append(out, &widget.TextSegment{Text: line, Style: style})
			}
		}
	}
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
	parts := []string{plural(s.Tokens, "token"), formatRate(s.TokensPerSec) + " tokens/s"}
	if s.FirstTokenMs > 0 {
		parts = append(parts, "first token "+formatMs(s.FirstTokenMs))
	}
	if w := speculationWords(s); w != "" {
		parts = append(parts, w)
	}
	if s.Stopped {
		parts = append(parts, "stopped")
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
