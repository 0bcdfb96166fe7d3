package desktop

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/widget"
)

// messageEntry is the message box: Enter sends, Shift+Enter starts a new
// line, as in every chat app.
type messageEntry struct {
	widget.Entry
	shift  bool
	onSend func()
}

func newMessageEntry(onSend func()) *messageEntry {
	e := &messageEntry{onSend: onSend}
	e.MultiLine = true
	e.Wrapping = fyne.TextWrapWord
	e.SetPlaceHolder("Message (Enter sends, Shift+Enter: a new line)")
	e.ExtendBaseWidget(e)
	return e
}

// KeyDown notes Shift, and passes the key on.
func (e *messageEntry) KeyDown(k *fyne.KeyEvent) {
	if k.Name == desktop.KeyShiftLeft || k.Name == desktop.KeyShiftRight {
		e.shift = true
	}
	e.Entry.KeyDown(k)
}

// KeyUp notes Shift's release.
func (e *messageEntry) KeyUp(k *fyne.KeyEvent) {
	if k.Name == desktop.KeyShiftLeft || k.Name == desktop.KeyShiftRight {
		e.shift = false
	}
	e.Entry.KeyUp(k)
}

// TypedKey sends on Enter; with Shift held the entry adds a line.
func (e *messageEntry) TypedKey(k *fyne.KeyEvent) {
	if (k.Name == fyne.KeyReturn || k.Name == fyne.KeyEnter) && !e.shift && !e.Disabled() {
		if e.onSend != nil {
			e.onSend()
		}
		return
	}
	e.Entry.TypedKey(k)
}
