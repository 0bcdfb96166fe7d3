package desktop

import "fyne.io/fyne/v2"

// smallShot takes the chat at 800×600, the smallest size the layout is
// made for (the conversations collapsed), then gives the window its size
// back.
func (a *App) smallShot(shot func(string) error) error {
	var size fyne.Size
	fyne.DoAndWait(func() {
		size = a.win.Canvas().Size()
		a.win.Resize(fyne.NewSize(800, 600))
	})
	err := shot("chat-800x600.png")
	fyne.DoAndWait(func() { a.win.Resize(size) })
	return err
}
