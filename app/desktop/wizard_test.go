package desktop

import (
	"os"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"dovetail/app/runner"
	"dovetail/app/runner/store"
)

// texts are the words an object shows: labels, checks, cards, buttons,
// inside containers, scrolls and cards.
func texts(o fyne.CanvasObject) []string {
	var out []string
	switch w := o.(type) {
	case *fyne.Container:
		for _, c := range w.Objects {
			out = append(out, texts(c)...)
		}
	case *container.Scroll:
		out = append(out, texts(w.Content)...)
	case *widget.Label:
		out = append(out, w.Text)
	case *widget.Check:
		out = append(out, w.Text)
	case *widget.Button:
		out = append(out, w.Text)
	case *widget.Card:
		out = append(out, w.Title, w.Subtitle)
		if w.Content != nil {
			out = append(out, texts(w.Content)...)
		}
	}
	return out
}

func showing(o fyne.CanvasObject, words string) bool {
	for _, t := range texts(o) {
		if strings.Contains(t, words) {
			return true
		}
	}
	return false
}

func (w *wizard) settle(t *testing.T) {
	t.Helper()
	waitFor(t, "the wizard's step", func() bool { return !w.busy() })
	if w.problem.Text() != "" {
		t.Fatalf("step %d: %s", w.step, w.problem.Text())
	}
}

// A first start shows the setup: the machine's checklist, the models
// found (the embedded one), calibration, the fit with memory bars and
// the predicted speed; saving writes the model's settings, opens the
// chat with the model loaded, and the next start asks nothing.
func TestWizardSetsUp(t *testing.T) {
	st := store.At(t.TempDir())
	a := newTestApp(t, Options{Store: st})
	a.Start()
	w := a.wizard
	if w == nil || a.win.Content() != w.content {
		t.Fatal("a first start shows no setup")
	}
	w.settle(t)
	for _, want := range []string{"CPU: ", "cores", "Memory: "} {
		if !showing(w.body, want) {
			t.Errorf("the machine's checklist says nothing of %q: %q", want, texts(w.body))
		}
	}
	test.Tap(w.next)
	if w.step != 1 || !showing(w.body, "TinyStories-656K (embedded)") {
		t.Fatalf("step %d shows %q", w.step, texts(w.body))
	}
	w.chosen[0] = false
	test.Tap(w.next)
	if w.step != 1 || !strings.Contains(w.problem.Text(), "Choose a model") {
		t.Fatalf("with no model chosen: step %d, problem %q", w.step, w.problem.Text())
	}
	w.chosen[0] = true
	test.Tap(w.next)
	w.settle(t)
	if w.step != 2 || !showing(w.body, "Calibrated 1 model") {
		t.Fatalf("calibration: step %d, %q", w.step, texts(w.body))
	}
	m, err := runner.OpenModel("")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, ok := runner.CachedCalibration(st, m, max(1, w.machine.CPU.Cores)); !ok {
		t.Error("the calibration is not kept for the planner")
	}
	test.Tap(w.next)
	w.settle(t)
	if len(w.fits) != 1 || w.fits[0].err != nil || w.fits[0].fit.Verdict == runner.NoFit {
		t.Fatalf("fit %+v", w.fits)
	}
	if !showing(w.body, "CPU memory") || !showing(w.body, "Weights") || !showing(w.body, "CPU threads") {
		t.Errorf("the fit shows %q", texts(w.body))
	}
	test.Tap(w.next)
	if w.next.Text != "Save these settings" || !showing(w.body, "tokens/s alone") {
		t.Fatalf("the speed step shows %q, its button %q", texts(w.body), w.next.Text)
	}
	test.Tap(w.next)
	if a.wizard != nil || a.win.Content() != a.tabs {
		t.Fatal("saving leaves the setup on screen")
	}
	waitLoaded(t, a)
	set, err := runner.LoadSettings(st)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := set.Models[m.Fingerprint]; !ok || len(set.Models) != 1 {
		t.Fatalf("settings saved for %v, want the embedded model's %s", set.Models, m.Fingerprint)
	}
	a.Close()

	b := newTestApp(t, Options{Store: st})
	b.Start()
	if b.wizard != nil {
		t.Fatal("the setup shows again after it was saved")
	}
	waitLoaded(t, b)
}

// Skipping the setup keeps the defaults, loads the embedded model and
// does not ask again; a model path that is not there is named.
func TestWizardSkipAndBadPath(t *testing.T) {
	st := store.At(t.TempDir())
	a := newTestApp(t, Options{Store: st})
	a.Start()
	w := a.wizard
	w.settle(t)
	test.Tap(w.next)
	var entry *widget.Entry
	var add *widget.Button
	for _, o := range w.body.Objects {
		if c, ok := o.(*fyne.Container); ok && len(c.Objects) == 2 {
			entry, _ = c.Objects[0].(*widget.Entry)
			add, _ = c.Objects[1].(*widget.Button)
		}
	}
	if entry == nil || add == nil {
		t.Fatalf("no path entry on the models step: %q", texts(w.body))
	}
	entry.SetText("/no/such/models")
	test.Tap(add)
	if got := w.problem.Text(); !strings.Contains(got, "/no/such/models") || !strings.Contains(got, "nothing is there") {
		t.Errorf("adding a missing path: %q", got)
	}
	if !strings.Contains(w.problem.raw.Text, "no such file or directory") {
		t.Errorf("the error behind Details: %q", w.problem.raw.Text)
	}
	test.Tap(w.cancel)
	if a.wizard != nil {
		t.Fatal("skipping leaves the setup on screen")
	}
	waitLoaded(t, a)
	if _, err := os.Stat(st.SettingsPath()); err != nil {
		t.Errorf("skipping keeps no record: %v", err)
	}
	a.Close()
	b := newTestApp(t, Options{Store: st})
	b.Start()
	if b.wizard != nil {
		t.Error("the setup shows again after it was skipped")
	}
	waitLoaded(t, b)
}
