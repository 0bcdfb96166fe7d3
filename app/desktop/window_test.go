package desktop

import (
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"dovetail/app/runner/store"
)

// Tab in the message box moves the focus on, Shift+Tab back; no tab is
// typed.
func TestTabMovesFocus(t *testing.T) {
	a := newTestApp(t, Options{SkipSetup: true})
	in := a.chat.input
	if in.AcceptsTab() {
		t.Fatal("the message box takes Tab as text")
	}
	c := a.win.Canvas()
	c.Focus(in)
	in.SetText("hi")
	in.TypedKey(&fyne.KeyEvent{Name: fyne.KeyTab})
	if in.Text != "hi" || c.Focused() == in || c.Focused() == nil {
		t.Fatalf("after Tab: text %q, focus on the box %v", in.Text, c.Focused() == in)
	}
	c.Focus(in)
	in.KeyDown(&fyne.KeyEvent{Name: desktop.KeyShiftLeft})
	in.TypedKey(&fyne.KeyEvent{Name: fyne.KeyTab})
	in.KeyUp(&fyne.KeyEvent{Name: desktop.KeyShiftLeft})
	if in.Text != "hi" || c.Focused() == in || c.Focused() == nil {
		t.Errorf("after Shift+Tab: text %q, focus on the box %v", in.Text, c.Focused() == in)
	}
}

// The window opens at the size it closed at; a size too small to use
// gives the default.
func TestWindowSizeRemembered(t *testing.T) {
	st := store.At(t.TempDir())
	a := newTestApp(t, Options{Store: st, SkipSetup: true})
	a.win.Resize(fyne.NewSize(900, 640))
	a.Close()
	b := newTestApp(t, Options{Store: st, SkipSetup: true})
	if got := b.win.Canvas().Size(); got != fyne.NewSize(900, 640) {
		t.Errorf("reopened at %v, closed at 900×640", got)
	}
	b.win.Resize(fyne.NewSize(20, 10))
	b.Close()
	if got := newTestApp(t, Options{Store: st, SkipSetup: true}).win.Canvas().Size(); got != defaultWindow {
		t.Errorf("closed at 20×10, reopened at %v", got)
	}
}

// Light and dark apply at once, whatever the system's variant, and are
// kept; following the system gives fyne's own theme back.
func TestThemeChoice(t *testing.T) {
	st := store.At(t.TempDir())
	a := newTestApp(t, Options{Store: st, SkipSetup: true})
	var choice *widget.RadioGroup
	for _, o := range objectsIn(a.settings.content) {
		if r, ok := o.(*widget.RadioGroup); ok {
			choice = r
		}
	}
	if choice == nil || choice.Selected != "Follow the system" {
		t.Fatalf("no theme choice, or not following the system: %v", choice)
	}
	bg := func(a *App) fyne.ThemeVariant {
		got := a.fy.Settings().Theme().Color(theme.ColorNameBackground, theme.VariantLight)
		for _, v := range []fyne.ThemeVariant{theme.VariantLight, theme.VariantDark} {
			if got == theme.DefaultTheme().Color(theme.ColorNameBackground, v) {
				return v
			}
		}
		return 99
	}
	choice.SetSelected("Dark")
	if v := bg(a); v != theme.VariantDark {
		t.Fatalf("Dark chosen, background of variant %d", v)
	}
	a.Close()
	b := newTestApp(t, Options{Store: st, SkipSetup: true})
	if v := bg(b); v != theme.VariantDark {
		t.Errorf("after a restart, background of variant %d", v)
	}
	for _, o := range objectsIn(b.settings.content) {
		if r, ok := o.(*widget.RadioGroup); ok {
			r.SetSelected("Light")
		}
	}
	if v := bg(b); v != theme.VariantLight || loadPrefs(st).Theme != "light" {
		t.Errorf("Light chosen, background of variant %d, kept %q", v, loadPrefs(st).Theme)
	}
	for _, o := range objectsIn(b.settings.content) {
		if r, ok := o.(*widget.RadioGroup); ok {
			r.SetSelected("Follow the system")
		}
	}
	if _, forced := b.fy.Settings().Theme().(forcedVariant); forced || loadPrefs(st).Theme != "" {
		t.Errorf("following the system: a forced theme %v, kept %q", forced, loadPrefs(st).Theme)
	}
}
