package desktop

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"dovetail/models/chat"
)

var errTest = errors.New("test")

// tokensOf is the size of a conversation's prompt on the loaded model.
func tokensOf(t *testing.T, a *App, msgs []Message) int {
	t.Helper()
	_, m := a.sess.loaded()
	ids, err := m.ChatTokens(chatMessages("", msgs))
	if err != nil {
		t.Fatal(err)
	}
	return len(ids)
}

// story is a conversation of turns of about 60 tokens each.
func story(turns int) []Message {
	var msgs []Message
	for i := range turns {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		msgs = append(msgs, Message{Role: role, Content: strings.Repeat("The cat sat on the mat and looked at the big red ball. ", 4), At: time.Now()})
	}
	return msgs
}

// errorText is the error row's words ("" when there is none).
func errorText(a *App) string {
	if a.chat.errRow == nil {
		return ""
	}
	return a.chat.errRow.(*fyne.Container).Objects[0].(*widget.Label).Text
}

// A message longer than the context is an error, shown as one below the
// messages: no reply with "0 tokens", nothing saved, the message back in
// the box to shorten; the meter never reads more than the context.
func TestChatErrorIsNotAReply(t *testing.T) {
	a := started(t, Options{})
	long := strings.Repeat("Once upon a time there was a cat.\n", 120) // ~840 tokens; the context is 512
	a.chat.input.SetText(long)
	a.chat.sendMessage()
	waitIdle(t, a)
	if len(a.chat.conv.Messages) != 0 || len(a.chat.views) != 0 {
		t.Fatalf("after the error: %d messages, %d shown", len(a.chat.conv.Messages), len(a.chat.views))
	}
	if got := errorText(a); !strings.Contains(got, "the context holds 512: shorten it") {
		t.Errorf("error row %q", got)
	}
	if a.chat.input.Text != strings.TrimSpace(long) {
		t.Error("the message is not back in the box")
	}
	if _, err := os.Stat(a.convs.path(a.chat.conv.ID)); err == nil {
		t.Error("a conversation of nothing but an error was saved")
	}
	a.chat.conv.Messages = []Message{{Role: "user", Content: long}}
	a.chat.updateStatus(nil)
	if a.chat.ctxBar.Value > a.chat.ctxBar.Max || a.chat.contextText() != "Context full: 512 of 512 tokens" {
		t.Errorf("meter %v of %v: %q", a.chat.ctxBar.Value, a.chat.ctxBar.Max, a.chat.contextText())
	}
}

// A conversation that outgrows the context leaves its oldest turns out
// of the prompt (not out of the chat), and the reply says so; with "stop
// at the limit" it is an error instead, kept out of the conversation,
// and Try again answers once there is room.
func TestChatRollingWindow(t *testing.T) {
	a := started(t, Options{})
	greedy(a)
	a.chat.sampling["max_tokens"].SetText("20")
	old := story(16)
	if n := tokensOf(t, a, old); n < 512 {
		t.Fatalf("the old turns take %d tokens: too few to overflow", n)
	}
	a.chat.conv.Messages = append([]Message(nil), old...)
	a.chat.open(a.chat.conv)
	got := send(t, a, "The dog")
	if got.Error != "" || got.Content == "" || !strings.Contains(got.Note, "oldest messages no longer fit in the context (512 tokens)") {
		t.Fatalf("reply %+v", got)
	}
	if len(a.chat.conv.Messages) != len(old)+2 {
		t.Errorf("the chat lost messages: %d", len(a.chat.conv.Messages))
	}
	v := a.chat.views[len(a.chat.views)-1]
	if v.note.Hidden || v.note.Text != got.Note {
		t.Errorf("the note shown %q (hidden %v)", v.note.Text, v.note.Hidden)
	}
	saved, err := a.convs.load(a.chat.conv.ID)
	if err != nil || saved.Messages[len(saved.Messages)-1].Note != got.Note {
		t.Errorf("saved without the note: %v", err)
	}
	if a.chat.ctxBar.Value > a.chat.ctxBar.Max {
		t.Errorf("meter %v of %v", a.chat.ctxBar.Value, a.chat.ctxBar.Max)
	}

	a.chat.overflow.SetSelected("Stop and say so")
	if !a.currentPrefs().StopAtLimit {
		t.Fatal("the choice is not kept")
	}
	n := len(a.chat.conv.Messages)
	a.chat.views[n-1].onRegenerate()
	waitIdle(t, a)
	if len(a.chat.conv.Messages) != n-1 || a.chat.conv.Messages[n-2].Role != "user" {
		t.Fatalf("stopped at the limit: %d messages, the last %+v", len(a.chat.conv.Messages), a.chat.conv.Messages[len(a.chat.conv.Messages)-1])
	}
	if got := errorText(a); !strings.Contains(got, "start a new chat") {
		t.Errorf("error row %q", got)
	}
	if saved, _ := a.convs.load(a.chat.conv.ID); saved.Messages[len(saved.Messages)-1].Role != "user" {
		t.Error("the error was saved as a reply")
	}
	a.chat.conv.Messages = a.chat.conv.Messages[len(a.chat.conv.Messages)-3:]
	a.chat.open(a.chat.conv)
	a.chat.showError(errTest, a.chat.retry)
	for _, o := range a.chat.errRow.(*fyne.Container).Objects {
		if b, ok := o.(*widget.Button); ok && b.Text == "Try again" {
			test.Tap(b)
		}
	}
	waitIdle(t, a)
	if last := a.chat.conv.Messages[len(a.chat.conv.Messages)-1]; last.Role != "assistant" || last.Content == "" || a.chat.errRow != nil {
		t.Errorf("Try again: %+v, error row %q", last, errorText(a))
	}
}

// A reply that fills the context says so.
func TestChatReplyFillsContext(t *testing.T) {
	a := started(t, Options{})
	greedy(a)
	a.chat.overflow.SetSelected("Stop and say so")
	_, m := a.sess.loaded()
	text := "Once upon a time"
	for {
		ids, _ := m.ChatTokens([]chat.Message{{Role: "user", Content: text + " the cat sat."}})
		if len(ids) > 505 {
			break
		}
		text += " the cat sat."
	}
	got := send(t, a, text)
	if got.Stats == nil || !got.Stats.ContextFull || !strings.Contains(a.chat.views[1].stats.Text, "the context is full") {
		t.Fatalf("reply %q, stats %+v, shown %q", got.Content, got.Stats, a.chat.views[1].stats.Text)
	}
}
