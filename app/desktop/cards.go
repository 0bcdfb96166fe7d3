package desktop

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"
)

// noteCard is a card whose explanation wraps with the window: a card's
// subtitle is one line, and a long one would make the whole window as
// wide as itself.
func noteCard(title, note string, content fyne.CanvasObject) *widget.Card {
	return widget.NewCard(title, "", container.NewVBox(wrapped(note), content))
}

// wrapped is a label that wraps between words.
func wrapped(text string) *widget.Label {
	l := widget.NewLabel(text)
	l.Wrapping = fyne.TextWrapWord
	return l
}
