package desktop

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
)

// sideCollapseWidth is the window width below which the conversations
// give their room to the messages, unless the user shows them.
const sideCollapseWidth = 1000

// sideLayout puts the conversations on the left (a fifth of the width,
// within bounds) and the chat beside them; narrower than
// sideCollapseWidth it leaves the conversations out.
type sideLayout struct{ c *chatView }

func (l *sideLayout) sideVisible(width float32) bool {
	if s := l.c.sideShown; s != nil {
		return *s
	}
	return width >= sideCollapseWidth
}

func (l *sideLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	side, main := objs[0], objs[1]
	x := float32(0)
	if l.sideVisible(size.Width) {
		w := min(max(size.Width/5, side.MinSize().Width, 180), 300)
		side.Show()
		side.Move(fyne.NewPos(0, 0))
		side.Resize(fyne.NewSize(w, size.Height))
		x = w + theme.Padding()
	} else {
		side.Hide()
	}
	l.c.fitStatus(size.Width >= sideCollapseWidth)
	main.Move(fyne.NewPos(x, 0))
	main.Resize(fyne.NewSize(size.Width-x, size.Height))
}

// fitStatus wraps the status line where the window has room for it, and
// cuts it to one line where it has not.
func (c *chatView) fitStatus(wide bool) {
	wrap, trunc := fyne.TextWrapOff, fyne.TextTruncateEllipsis
	if wide {
		wrap, trunc = fyne.TextWrapWord, fyne.TextTruncateOff
	}
	if c.status.Wrapping != wrap || c.status.Truncation != trunc {
		c.status.Wrapping, c.status.Truncation = wrap, trunc
		c.status.Refresh()
	}
}

func (l *sideLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	return objs[1].MinSize()
}

// toggleSide shows the conversations, or hides them.
func (c *chatView) toggleSide() {
	shown := !c.side.Visible()
	c.sideShown = &shown
	c.content.(*fyne.Container).Refresh()
}

// ctxMeterWidth holds the context meter's longest words.
const ctxMeterWidth = 250

// bottomBar is the message box with Send and Stop beside it, the
// colouring on one line, and the context meter and the status on one
// line: as little height as they can take from the messages.
func (c *chatView) bottomBar() fyne.CanvasObject {
	return container.NewVBox(
		container.NewBorder(nil, nil, nil, container.NewHBox(c.send, c.stop), c.input),
		container.NewBorder(nil, nil, container.NewHBox(c.hl, legend()), c.copied.label),
		container.NewBorder(nil, nil, container.NewGridWrap(fyne.NewSize(ctxMeterWidth, c.ctxBar.MinSize().Height), c.ctxBar), nil, c.status))
}

// samplingScroll is the system prompt and sampling panel, scrolling
// within a bounded height so that opening it leaves the messages room.
func (c *chatView) samplingScroll() fyne.CanvasObject {
	s := container.NewVScroll(c.samplingPanel())
	s.SetMinSize(fyne.NewSize(0, 170))
	return s
}

// atEnd reports whether the messages show their end.
func (c *chatView) atEnd() bool {
	const slack = 16 // a line's part: the user has not scrolled up
	return c.scroll.Offset.Y+c.scroll.Size().Height >= c.messages.MinSize().Height-slack
}

// toEnd scrolls to the end of the messages. fyne's scroll measures the
// content at its last size, which a new or grown message has not given
// it yet: the content is sized first.
func (c *chatView) toEnd() {
	min := c.messages.MinSize()
	size := c.scroll.Size()
	c.messages.Resize(fyne.NewSize(max(size.Width, min.Width), max(size.Height, min.Height)))
	c.scroll.ScrollToBottom()
}

// followEnd scrolls to the end unless the user scrolled up.
func (c *chatView) followEnd() {
	if c.follow {
		c.toEnd()
	}
}

// endLayout sizes the messages' scroll and, when it follows the end,
// keeps the end in view as the window is resized.
type endLayout struct{ c *chatView }

func (l *endLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	objs[0].Resize(size)
	if l.c.follow {
		l.c.toEnd()
	}
}

func (l *endLayout) MinSize(objs []fyne.CanvasObject) fyne.Size { return objs[0].MinSize() }
