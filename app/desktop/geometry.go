package desktop

import "fyne.io/fyne/v2"

// The window opens at the size it had when it last closed. fyne has no
// window position to read or set (only CenterOnScreen), so where it opens
// is the window manager's choice.

// defaultWindow is the size of a first start.
var defaultWindow = fyne.NewSize(1100, 760)

// minWindow is the least size restored: a size saved smaller than this
// (a damaged file, a window shrunk to nothing) gives the default.
var minWindow = fyne.NewSize(640, 480)

// windowSize is the size to open at, from the saved settings.
func windowSize(p Prefs) fyne.Size {
	if p.Width < minWindow.Width || p.Height < minWindow.Height {
		return defaultWindow
	}
	return fyne.NewSize(p.Width, p.Height)
}

// saveWindowSize keeps the window's size for the next start.
func (a *App) saveWindowSize() {
	s := a.win.Canvas().Size()
	if s.Width <= 0 || s.Height <= 0 {
		return
	}
	p := a.currentPrefs()
	p.Width, p.Height = s.Width, s.Height
	a.setPrefs(p)
}
