package desktop

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"dovetail/app/runner/discover"
	"dovetail/app/runner/pull"
	"dovetail/internal/golden"
	"dovetail/internal/registrytest"
)

// withRegistry is an app whose "Get models" page pulls from a local
// registry holding "tiny:1b" into a folder of the test's own; the blob
// stalls halfway until released. Each before publishes what it will on
// the registry's Hugging Face side first.
func withRegistry(t *testing.T, o Options, before ...func(publish func(repo, dir string) error)) (*App, *registrytest.Registry, string) {
	t.Helper()
	gguf, err := os.ReadFile(golden.ModelPath("stories260K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	reg := registrytest.New(t)
	reg.Add("library/tiny:1b", gguf, nil)
	reg.Stall(int64(len(gguf) / 2))
	for _, f := range before { // before the app reads the catalogue
		f(reg.AddRepoDir)
	}
	dir := t.TempDir()
	o.Pulls = pull.Options{Dir: dir, Env: reg.Env}
	o.Places = &discover.Places{Pulled: []string{dir}}
	return newTestApp(t, o), reg, dir
}

// pullHalfway types name in g's box, presses Pull and waits for the bar
// to stand between empty and full.
func pullHalfway(t *testing.T, g *getModels, name string) {
	t.Helper()
	g.name.SetText(name)
	test.Tap(g.pull)
	// The page's widgets are written by the pull's goroutine under the
	// test driver: what it shows is read once it says it shows a part.
	waitFor(t, "progress", func() bool {
		p := g.shown.Load()
		return p != nil && p.Total > 0 && p.Completed > 0 && p.Completed < p.Total
	})
	if g.bar.Value <= 0 || g.bar.Value >= 1 || !strings.Contains(g.status.Text, " of ") {
		t.Errorf("halfway the bar stands at %v, the status says %q", g.bar.Value, g.status.Text)
	}
	if !g.pull.Disabled() || g.cancel.Disabled() {
		t.Error("while pulling, Pull is not held back or Cancel is not offered")
	}
}

// A pull shows its progress and ends with the model listed on the page
// and in the picker; the catalogue marks each model with its fit.
func TestGetModelsPulls(t *testing.T) {
	a, reg, _ := withRegistry(t, Options{SkipSetup: true})
	g := a.get
	pullHalfway(t, g, "tiny:1b")
	reg.Release()
	waitFor(t, "the pull's end", func() bool { return !g.busy() })
	if !strings.Contains(g.status.Text, "Pulled tiny:1b") || g.bar.Value != 1 || g.use.Hidden {
		t.Fatalf("after the pull: %q, bar %v", g.status.Text, g.bar.Value)
	}
	if !showing(g.pulled, "tiny:1b") {
		t.Errorf("the page lists %q", texts(g.pulled))
	}
	offered := false
	for _, o := range a.chat.pick.sel.Options {
		offered = offered || strings.HasPrefix(o, "tiny:1b ")
	}
	if !containsName(a.modelList(), "tiny:1b") || !offered {
		t.Errorf("the picker offers %q", a.chat.pick.sel.Options)
	}
	waitFor(t, "the catalogue's fits", func() bool { return g.fits[0].Text != "…" })
	for i, l := range g.fits {
		if l.Text != "Fits in memory" && l.Text != "Layers on the GPU" && l.Text != "Too big for this machine" {
			t.Errorf("%s: %q", catalog[i].Name, l.Text)
		}
	}
	test.Tap(g.use)
	waitLoaded(t, a)
	if _, m := a.sess.loaded(); m.Path != g.last.Path || a.tabs.SelectedIndex() != 0 {
		t.Errorf("Chat with it loaded %s, tab %d", m.Path, a.tabs.SelectedIndex())
	}
	g.name.SetText("not a name!")
	test.Tap(g.pull)
	if g.busy() || !strings.Contains(g.status.Text, "not a name!") {
		t.Errorf("a bad name: %q", g.status.Text)
	}
}

// Cancel stops the download and keeps its part; pulling again asks the
// registry for the rest only, and ends with the model.
func TestGetModelsCancelResumes(t *testing.T) {
	a, reg, dir := withRegistry(t, Options{SkipSetup: true})
	g := a.get
	pullHalfway(t, g, "tiny:1b")
	test.Tap(g.cancel)
	waitFor(t, "the cancel", func() bool { return !g.busy() })
	if !strings.Contains(g.status.Text, "Stopped") || g.pull.Disabled() {
		t.Fatalf("after cancel: %q", g.status.Text)
	}
	if ms, _ := pull.List(dir); len(ms) != 0 {
		t.Fatalf("a cancelled pull listed %+v", ms)
	}
	part := largestFile(t, dir)
	if part == 0 {
		t.Fatal("the part downloaded is gone")
	}
	reg.Release()
	test.Tap(g.pull)
	waitFor(t, "the resumed pull", func() bool { return !g.busy() })
	ranges := reg.Ranges()
	if !strings.Contains(g.status.Text, "Pulled tiny:1b") || len(ranges) < 2 || ranges[len(ranges)-1] != fmt.Sprintf("bytes=%d-", part) {
		t.Errorf("resumed: %q, ranges %q", g.status.Text, ranges)
	}
}

// With only the embedded model, the wizard's models step offers the page;
// a model pulled there joins the models to set up, chosen.
func TestWizardOffersModels(t *testing.T) {
	a, reg, _ := withRegistry(t, Options{})
	reg.Release()
	a.Start()
	w := a.wizard
	w.settle(t)
	test.Tap(w.next)
	if !showing(w.body, "get a model") {
		t.Fatalf("the models step shows %q", texts(w.body))
	}
	box := find[*widget.Entry](w.body, func(e *widget.Entry) bool { return strings.Contains(e.PlaceHolder, "model's name") })
	pullButton := find[*widget.Button](w.body, func(b *widget.Button) bool { return b.Text == "Pull" })
	if box == nil || pullButton == nil {
		t.Fatal("no name box or Pull button")
	}
	box.SetText("tiny:1b")
	test.Tap(pullButton)
	waitFor(t, "the pull's end", func() bool { return !w.get.busy() })
	if len(w.chosenModels()) != 2 || !showing(w.body, "tiny:1b") {
		t.Errorf("after the pull the wizard chose %d models and shows %q", len(w.chosenModels()), texts(w.body))
	}
}

func find[T fyne.CanvasObject](o fyne.CanvasObject, ok func(T) bool) T {
	var zero T
	if w, is := o.(T); is && ok(w) {
		return w
	}
	var kids []fyne.CanvasObject
	switch c := o.(type) {
	case *fyne.Container:
		kids = c.Objects
	case *container.Scroll:
		kids = []fyne.CanvasObject{c.Content}
	}
	for _, k := range kids {
		if w := find(k, ok); any(w) != any(zero) {
			return w
		}
	}
	return zero
}

func containsName(ms []discover.Model, name string) bool {
	for _, m := range ms {
		if m.Name == name && m.Source == "pulled" {
			return true
		}
	}
	return false
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// largestFile is the size of the largest file under dir.
func largestFile(t *testing.T, dir string) int64 {
	t.Helper()
	var most int64
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if info, err := e.Info(); err == nil {
				most = max(most, info.Size())
			}
		}
		return nil
	})
	return most
}
