package desktop

import (
	"os"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"dovetail/app/runner/store"
)

// The embedded model's end-of-story text is nowhere: not in the reply
// shown, copied or saved. The message's newline (Shift+Enter) and the
// reply's paragraphs stay lines of their own, coloured by source or not
// (the reply continues the message, which the completion model's reply
// shows in front of it).
func TestChatTextClean(t *testing.T) {
	st := store.At(t.TempDir())
	a := started(t, Options{Store: st})
	greedy(a)
	got := send(t, a, "Once upon a time\nthere was a cat")
	if !strings.Contains(got.Content, "\n") {
		t.Fatalf("the reply has no paragraphs to check: %q", got.Content)
	}
	user := a.chat.views[0].body.lineTexts()
	if len(user) < 2 || user[0] != "Once upon a time" || user[1] != "there was a cat" {
		t.Errorf("the message shows as %q", user)
	}
	v := a.chat.views[1]
	test.Tap(v.actions.Objects[0].(*widget.Button))
	saved, err := os.ReadFile(a.convs.path(a.chat.conv.ID))
	if err != nil {
		t.Fatal(err)
	}
	for _, hl := range []bool{true, false} {
		a.chat.hl.SetChecked(hl)
		shown := v.body.String()
		for what, s := range map[string]string{"shown": shown, "copied": a.fy.Clipboard().Content(), "saved": string(saved), "kept": got.Content} {
			if strings.Contains(s, "end_story") || strings.Contains(s, "<|") {
				t.Errorf("colour %v: the %s text holds the end text: %q", hl, what, s)
			}
		}
		if shown != got.Prompt+got.Content {
			t.Errorf("colour %v: shown %q\nwant %q", hl, shown, got.Prompt+got.Content)
		}
		lines := v.body.lineTexts()
		for _, p := range strings.Split(shown, "\n") {
			first := strings.Fields(p)
			if len(first) == 0 {
				continue
			}
			found := false
			for _, l := range lines {
				found = found || strings.HasPrefix(l, strings.TrimLeft(p[:strings.Index(p, first[0])+len(first[0])], " "))
			}
			if !found {
				t.Errorf("colour %v: the paragraph %q starts no line of %q", hl, p, lines)
			}
		}
	}
}

// A conversation saved before replies stopped at the end text shows
// without it (and is saved so, next time it is saved).
func TestOldRepliesLoseTheEndText(t *testing.T) {
	a := started(t, Options{})
	c := &Conversation{ID: newID(), Messages: []Message{{Role: "user", Content: "Hi"},
		{Role: "assistant", Content: "The end.<|end_story|>", Segments: []Segment{{Text: "The end.<|end_"}, {Text: "story|>", Source: 1}}}}}
	if err := a.convs.save(c); err != nil {
		t.Fatal(err)
	}
	a.chat.reloadList()
	a.chat.list.Select(0)
	m := a.chat.conv.Messages[1]
	if m.Content != "The end." || len(m.Segments) != 1 || m.Segments[0].Text != "The end." || a.chat.views[1].body.String() != "The end." {
		t.Fatalf("reopened: %+v, shown %q", m, a.chat.views[1].body.String())
	}
}
