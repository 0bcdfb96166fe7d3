package desktop

import (
	"os"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// savedChat puts a saved chat of two messages on screen.
func savedChat(t *testing.T, a *App) *Conversation {
	t.Helper()
	conv := &Conversation{ID: newID(), Messages: []Message{{Role: "user", Content: "Tell me a story"}, {Role: "assistant", Content: "Once"}}}
	if err := a.convs.save(conv); err != nil {
		t.Fatal(err)
	}
	a.chat.reloadList()
	a.chat.open(conv)
	return conv
}

// Delete asks first: "Keep it" keeps the chat, on screen and on disk;
// "Delete" deletes it.
func TestDeleteChatConfirms(t *testing.T) {
	a := newTestApp(t, Options{SkipSetup: true})
	conv := savedChat(t, a)
	tapButton(t, a.chat.content, "Delete")
	d := topOverlay(t, a)
	if shown := strings.Join(labels(d), "|"); !strings.Contains(shown, "“Tell me a story” and its 2 messages are deleted for good.") {
		t.Errorf("the dialog says %q", shown)
	}
	tapButton(t, d, "Keep it")
	if _, err := os.Stat(a.convs.path(conv.ID)); err != nil || a.chat.conv != conv || len(a.chat.convList) != 1 {
		t.Fatalf("after Keep it: file %v, chat shown %v, %d listed", err, a.chat.conv == conv, len(a.chat.convList))
	}
	tapButton(t, a.chat.content, "Delete")
	tapButton(t, topOverlay(t, a), "Delete")
	if _, err := os.Stat(a.convs.path(conv.ID)); err == nil || a.chat.conv == conv || len(a.chat.convList) != 0 {
		t.Errorf("after Delete: the file is there %v, chat shown %v, %d listed", err == nil, a.chat.conv == conv, len(a.chat.convList))
	}
}

// Copying says "Copied".
func TestCopiedShown(t *testing.T) {
	a := newTestApp(t, Options{SkipSetup: true})
	savedChat(t, a)
	if a.chat.copied.label.Visible() {
		t.Fatal("Copied shows before any copy")
	}
	reply := a.chat.views[1]
	for _, o := range objectsIn(reply) {
		if b, ok := o.(*widget.Button); ok && b.Icon != nil && b.Icon.Name() == theme.ContentCopyIcon().Name() {
			test.Tap(b)
			break
		}
	}
	if got := a.fy.Clipboard().Content(); got != "Once" {
		t.Fatalf("clipboard %q", got)
	}
	if l := a.chat.copied.label; !l.Visible() || l.Text != "Copied" {
		t.Errorf("after a copy: %q shown %v", l.Text, l.Visible())
	}
}
