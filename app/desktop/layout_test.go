package desktop

import (
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"dovetail/engine"
)

// At 800×600 the messages have at least half the window's height and the
// conversations give way (the menu button brings them back); at 1280×800
// the conversations are shown.
func TestChatLayoutSmallWindow(t *testing.T) {
	a := started(t, Options{})
	a.win.Resize(fyne.NewSize(800, 600))
	if h := a.chat.scroll.Size().Height; h < 300 {
		t.Errorf("at 800×600 the messages have %.0f px of 600", h)
	}
	if a.chat.side.Visible() {
		t.Error("at 800 wide the conversations still take room")
	}
	if w := a.win.Content().MinSize().Width; w > 800 {
		t.Errorf("the window needs %.0f px across", w)
	}
	test.Tap(a.chat.sideToggle)
	if !a.chat.side.Visible() || a.chat.side.Size().Width < 150 {
		t.Errorf("the menu button shows the conversations %.0f px wide (visible %v)", a.chat.side.Size().Width, a.chat.side.Visible())
	}
	a.chat.sideShown = nil
	a.win.Resize(fyne.NewSize(1280, 800))
	if !a.chat.side.Visible() {
		t.Error("at 1280 wide the conversations are hidden")
	}
	if h := a.chat.scroll.Size().Height; h < 400 {
		t.Errorf("at 1280×800 the messages have %.0f px of 800", h)
	}
	if a.chat.status.Wrapping != fyne.TextWrapWord {
		t.Error("at 1280 wide the status line is cut to one line")
	}
	a.win.Resize(fyne.NewSize(800, 600))
	if a.chat.status.Truncation != fyne.TextTruncateEllipsis {
		t.Error("at 800 wide the status line wraps")
	}
}

// endOffset is the scroll offset that shows the messages' end.
func endOffset(a *App) float32 {
	return max(a.chat.messages.MinSize().Height-a.chat.scroll.Size().Height, 0)
}

// A reopened chat opens at its end, and stays there as the window is
// resized; a streaming reply is followed to its
// end unless the user scrolls up, and stays where the user left it then;
// Regenerate follows the end again.
func TestChatFollowsTheEnd(t *testing.T) {
	g := &gate{entered: make(chan struct{}), release: make(chan struct{})}
	a := started(t, Options{NewDrafter: func(int) (engine.Drafter, error) { return g, nil }})
	a.win.Resize(fyne.NewSize(800, 600))
	greedy(a)
	a.chat.conv.Messages = story(30)
	a.chat.open(a.chat.conv)
	if end := endOffset(a); end < 500 || a.chat.scroll.Offset.Y != end {
		t.Fatalf("opened at %.0f of %.0f", a.chat.scroll.Offset.Y, end)
	}
	a.win.Resize(fyne.NewSize(1280, 800))
	if end := endOffset(a); a.chat.scroll.Offset.Y != end {
		t.Errorf("resized, at %.0f of %.0f", a.chat.scroll.Offset.Y, end)
	}
	a.win.Resize(fyne.NewSize(800, 600))
	if end := endOffset(a); a.chat.scroll.Offset.Y != end {
		t.Errorf("resized back, at %.0f of %.0f", a.chat.scroll.Offset.Y, end)
	}

	a.chat.input.SetText("Once upon a time")
	a.chat.sendMessage()
	<-g.entered
	waitFor(t, "the frame drawn before the gate", func() bool {
		a.chat.mu.Lock()
		defer a.chat.mu.Unlock()
		return !a.chat.scheduled
	})
	a.chat.scroll.Scrolled(&fyne.ScrollEvent{Scrolled: fyne.NewDelta(0, 400)})
	left := a.chat.scroll.Offset.Y
	if a.chat.follow {
		t.Fatal("scrolled up, still following")
	}
	close(g.release)
	waitIdle(t, a)
	if a.chat.scroll.Offset.Y != left || left >= endOffset(a) {
		t.Errorf("scrolled up to %.0f, the reply moved it to %.0f (end %.0f)", left, a.chat.scroll.Offset.Y, endOffset(a))
	}

	before := endOffset(a)
	a.chat.views[len(a.chat.views)-1].onRegenerate()
	waitIdle(t, a)
	if end := endOffset(a); a.chat.scroll.Offset.Y != end || end < before-50 {
		t.Errorf("after Regenerate at %.0f of %.0f", a.chat.scroll.Offset.Y, end)
	}
}
