package desktop

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/widget"
)

// messageEntry is the message box: Enter sends, Shift+Enter starts a new
// line, Tab and Shift+Tab move to the next and previous control, as in
// every chat app.
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

// AcceptsTab is false: a multi-line entry would type the tab, and a tab
// in a chat message is never what was meant; the window moves the focus
// instead.
func (e *messageEntry) AcceptsTab() bool { return false }

// TypedKey sends on Enter; with Shift held the entry adds a line. A Tab
// that reaches it anyway moves the focus, as the window does.
func (e *messageEntry) TypedKey(k *fyne.KeyEvent) {
	if k.Name == fyne.KeyTab {
		e.moveFocus()
		return
	}
	if (k.Name == fyne.KeyReturn || k.Name == fyne.KeyEnter) && !e.shift && !e.Disabled() {
		if e.onSend != nil {
			e.onSend()
		}
		return
	}
	e.Entry.TypedKey(k)
}

// moveFocus moves the focus on from the entry, back with Shift held.
func (e *messageEntry) moveFocus() {
	c := fyne.CurrentApp().Driver().CanvasForObject(e)
	if c == nil {
		return
	}
	if e.shift {
		c.FocusPrevious()
		return
	}
	c.FocusNext()
}
