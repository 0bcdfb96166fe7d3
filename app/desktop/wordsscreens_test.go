package desktop

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"dovetail/app/runner/store"
)

// Every screen of the tour, and the problems a user can run into on
// them, keeps the rules for words: sentence-case labels, one way to
// write CPU and GPU, plurals that agree, no raw errors.
func TestWordsEveryScreen(t *testing.T) {
	st := store.At(t.TempDir())
	a := newTestApp(t, Options{Store: st})
	seen := map[string]bool{}
	check := func(screen string) {
		t.Helper()
		var texts []shownText
		fyne.DoAndWait(func() { texts = screenTexts(a.win.Content()) })
		for _, s := range texts {
			if seen[s.text] {
				continue
			}
			seen[s.text] = true
			for _, p := range wordProblems(s) {
				t.Errorf("%s: %q: %s", screen, s.text, p)
			}
		}
	}

	a.Start()
	w := a.wizard
	w.settle(t)
	check("the machine check")
	test.Tap(w.next)
	check("the models")
	add := findButton(w.body, "Add")
	test.Tap(add) // no path typed
	check("the models, adding nothing")
	entryBeside(w.body).SetText("/no/such/models")
	test.Tap(add)
	check("the models, adding a missing path")
	test.Tap(w.next)
	w.settle(t)
	check("calibration")
	test.Tap(w.next)
	w.settle(t)
	check("the fit")
	test.Tap(w.next)
	check("the speed")
	test.Tap(w.next)
	waitLoaded(t, a)

	check("the chat")
	for _, m := range a.win.MainMenu().Items {
		for _, it := range m.Items {
			if p := wordProblems(shownText{it.Label, true}); len(p) > 0 {
				t.Errorf("menu %q: %v", it.Label, p)
			}
		}
	}
	send(t, a, "Once upon a time")
	fyne.DoAndWait(func() { a.tabs.SelectIndex(1); a.learn.refresh() })
	check("the chat and the speed and learning after a reply")

	s := a.settings
	s.threads.SetText("many")
	test.Tap(s.apply)
	check("settings, a bad number")
	s.threads.SetText("")
	s.address.SetText("localhost")
	s.api.SetChecked(true)
	check("settings, an address without a port")

	a.chat.loadModel("/no/such/model.gguf")
	waitFor(t, "the failed load", func() bool { return !a.chat.isLoading() })
	check("the chat, a model that is not there")

	// The walk reached every screen: a text of each was checked.
	for _, want := range []string{"CPU: ", "Memory: ", "Measuring what this machine", "Calibrated 1 model", "Weights ", "Tokens/s", "Roll back to the previous draft",
		"Load the model again with these settings", "the target's own", " tokens · ", "could not be loaded"} {
		found := false
		for s := range seen {
			found = found || strings.Contains(s, want)
		}
		if !found {
			t.Errorf("the walk never saw %q", want)
		}
	}
}

// findButton is the button with text under o.
func findButton(o fyne.CanvasObject, text string) *widget.Button {
	switch w := o.(type) {
	case *widget.Button:
		if w.Text == text {
			return w
		}
	case *fyne.Container:
		for _, c := range w.Objects {
			if b := findButton(c, text); b != nil {
				return b
			}
		}
	}
	return nil
}

// entryBeside is the models step's path box.
func entryBeside(o *fyne.Container) *widget.Entry {
	for _, c := range o.Objects {
		if row, ok := c.(*fyne.Container); ok && len(row.Objects) == 2 {
			if e, ok := row.Objects[0].(*widget.Entry); ok {
				return e
			}
		}
	}
	return nil
}
