package desktop

import (
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"
)

// copiedFor is how long "Copied" stays after a copy.
const copiedFor = 2 * time.Second

// copiedNote is the word "Copied", shown for a moment after a copy to the
// clipboard: copying changes nothing on screen otherwise.
type copiedNote struct {
	label *widget.Label
	mu    sync.Mutex
	shown int // copies so far: a later copy's timer hides it, not an earlier one's
}

func newCopiedNote() *copiedNote {
	n := &copiedNote{label: widget.NewLabel("Copied")}
	n.label.Importance = widget.SuccessImportance
	n.label.Hide()
	return n
}

// show shows the note, and hides it copiedFor later unless copied again.
func (n *copiedNote) show() {
	n.mu.Lock()
	n.shown++
	mine := n.shown
	n.mu.Unlock()
	n.label.Show()
	time.AfterFunc(copiedFor, func() {
		n.mu.Lock()
		last := n.shown == mine
		n.mu.Unlock()
		if last {
			fyne.Do(n.label.Hide)
		}
	})
}
