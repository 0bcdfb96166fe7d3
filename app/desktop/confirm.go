package desktop

import (
	"fmt"

	"dovetail/internal/plural"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"
)

// Deleting a chat and clearing the text memory cannot be undone, so each
// asks first; the dialog's default answer keeps what is there.

// confirmDelete asks before deleting the chat shown. A chat with nothing
// in it goes without asking: nothing is lost.
func (c *chatView) confirmDelete() {
	if c.conv == nil || c.isBusy() {
		return
	}
	n := len(c.conv.Messages)
	if n == 0 {
		c.deleteConversation()
		return
	}
	what := fmt.Sprintf("“%s”", title(c.conv))
	confirmThen(c.a.win, "Delete this chat?", fmt.Sprintf("%s and its %s are deleted for good.", what, plural.Of(n, "message")),
		"Delete", c.deleteConversation)
}

// confirmClear asks before forgetting the text memory.
func (l *learnView) confirmClear() {
	r, _ := l.a.sess.loaded()
	if r == nil {
		return
	}
	what := "The verified text"
	if st, ok := r.Adaptation(); ok && st.Remembered > 0 {
		what = fmt.Sprintf("The %s of verified text", plural.Of(st.Remembered, "token"))
	}
	confirmThen(l.a.win, "Clear the text memory?",
		what+" that drafts propose continuations from will be forgotten. The model and its draft stay as they are.",
		"Clear", l.clearMemory)
}

// confirmThen asks title and msg, and does do when the answer is yes; the
// other answer, "Keep it", is the one that loses nothing.
func confirmThen(win fyne.Window, title, msg, yes string, do func()) {
	d := dialog.NewConfirm(title, msg, func(ok bool) {
		if ok {
			do()
		}
	}, win)
	d.SetConfirmText(yes)
	d.SetDismissText("Keep it")
	d.Show()
}
