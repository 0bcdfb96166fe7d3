package desktop

import (
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// Themes: light, dark, or the system's (fyne follows the desktop's
// preference). A chosen variant is fyne's own theme with the variant
// forced on every colour.

// themeChoices are the settings' words for each Prefs.Theme, in order.
var themeChoices = []struct{ key, words string }{
	{"", "Follow the system"}, {"light", "Light"}, {"dark", "Dark"},
}

// forcedVariant is fyne's theme in one variant whatever the system says.
type forcedVariant struct {
	fyne.Theme
	variant fyne.ThemeVariant
}

func (f forcedVariant) Color(n fyne.ThemeColorName, _ fyne.ThemeVariant) color.Color {
	return f.Theme.Color(n, f.variant)
}

// themeFor is the theme for a Prefs.Theme ("": the system's).
func themeFor(key string) fyne.Theme {
	switch key {
	case "light":
		return forcedVariant{theme.DefaultTheme(), theme.VariantLight}
	case "dark":
		return forcedVariant{theme.DefaultTheme(), theme.VariantDark}
	}
	return theme.DefaultTheme()
}

// applyTheme puts the theme chosen on the app. Following the system on a
// start leaves the app's theme as it is.
func (a *App) applyTheme(key string, changed bool) {
	if key == "" && !changed {
		return
	}
	a.fy.Settings().SetTheme(themeFor(key))
}

// themeSetting is the settings' choice of theme; it applies at once and
// is kept.
func (a *App) themeSetting() fyne.CanvasObject {
	var words []string
	for _, c := range themeChoices {
		words = append(words, c.words)
	}
	r := widget.NewRadioGroup(words, nil)
	r.Horizontal = true
	r.Required = true
	for _, c := range themeChoices {
		if c.key == a.currentPrefs().Theme {
			r.Selected = c.words
		}
	}
	r.OnChanged = func(w string) {
		for _, c := range themeChoices {
			if c.words == w {
				a.setTheme(c.key)
			}
		}
	}
	return widget.NewCard("Appearance", "", r)
}

// setTheme applies and keeps a Prefs.Theme.
func (a *App) setTheme(key string) {
	p := a.currentPrefs()
	p.Theme = key
	a.setPrefs(p)
	a.applyTheme(key, true)
}
