package desktop

import (
	"path/filepath"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/widget"

	"dovetail/app/runner/pull"
	"dovetail/models"
	"dovetail/models/draft"
	"dovetail/models/eagle/eagletest"
)

// withDraftCatalogue lists tiny:1b in the catalogue with an EAGLE-3
// draft that reg serves as a Hugging Face repository, for the test.
func withDraftCatalogue(t *testing.T, publish func(repo, dir string) error) catalogDraft {
	t.Helper()
	tg := models.Config{Arch: "llama", Hidden: 32, Layers: 8, Heads: 4, KVHeads: 2, HeadDim: 8, FFN: 48, Vocab: 100,
		ContextLength: 256, RMSEps: 1e-5, RopeTheta: 10000}
	dir := filepath.Join(t.TempDir(), "repo")
	if err := eagletest.Write(dir, eagletest.Spec{Target: tg, Kind: draft.EAGLE3}); err != nil {
		t.Fatal(err)
	}
	if err := publish("org/eagle3-tiny", dir); err != nil {
		t.Fatal(err)
	}
	d := catalogDraft{Name: "hf.co/org/eagle3-tiny", About: "EAGLE-3 draft for the test", Size: 40e3}
	saved := catalog
	catalog = append(append([]catalogModel(nil), saved...), catalogModel{Name: "tiny:1b", About: "Tiny", Size: 1e6, Draft: d})
	t.Cleanup(func() { catalog = saved })
	return d
}

// Pulling a catalogue model that has a published EAGLE draft offers the
// draft; its button pulls it through the same pull, into the models
// folder's drafts, and the page lists it (no "Chat with it": a draft is
// no model to chat with).
func TestGetModelsOffersDraft(t *testing.T) {
	var d catalogDraft
	a, reg, dir := withRegistry(t, Options{SkipSetup: true}, func(publish func(string, string) error) { d = withDraftCatalogue(t, publish) })
	reg.Release()
	g := a.get
	want := "Get its EAGLE draft (39.1 KiB)"
	if b := findButton(g.content, want); b == nil {
		t.Fatalf("the catalogue offers no %q", want)
	}
	if !g.offer.Hidden {
		t.Error("a draft is offered before any pull")
	}
	g.name.SetText("tiny:1b")
	test.Tap(g.pull)
	waitFor(t, "the pull's end", func() bool { return !g.busy() })
	if g.offer.Hidden || g.offer.Text != want {
		t.Fatalf("after pulling tiny:1b the page offers %q (hidden %v)", g.offer.Text, g.offer.Hidden)
	}
	test.Tap(g.offer)
	waitFor(t, "the draft's pull", func() bool { return !g.busy() })
	into := filepath.Join(dir, "drafts", "hf.co", "org", "eagle3-tiny")
	if !strings.HasPrefix(g.status.Text, "Pulled the EAGLE-3 draft hf.co/org/eagle3-tiny (") || !strings.HasSuffix(g.status.Text, "into "+into+".") {
		t.Errorf("after the draft's pull: %q", g.status.Text)
	}
	if !g.use.Hidden || !g.offer.Hidden {
		t.Error("after a draft's pull the page offers to chat with it, or to pull it again")
	}
	if ds, _ := pull.Drafts(dir); len(ds) != 1 || ds[0].Name != d.Name || ds[0].Kind != "eagle3" {
		t.Errorf("pulled drafts: %+v", ds)
	}
	if !showing(g.pulled, "EAGLE-3 draft hf.co/org/eagle3-tiny") || !showing(g.pulled, "tiny:1b") {
		t.Errorf("the page lists %q", texts(g.pulled))
	}
	if containsName(a.modelList(), d.Name) {
		t.Error("the draft is offered as a model")
	}
	// The page's words about drafts keep the rules for words.
	n := 0
	for _, s := range screenTexts(g.content) {
		if strings.Contains(s.text, "draft") {
			n++
			for _, p := range wordProblems(s) {
				t.Errorf("%q: %s", s.text, p)
			}
		}
	}
	if n < 4 {
		t.Errorf("the page shows %d texts about drafts", n)
	}
}

// The catalogue's draft line pulls the draft by itself; a repository
// that is no draft (nothing there) says so in one line, without a raw
// error.
func TestGetModelsDraftLine(t *testing.T) {
	a, reg, dir := withRegistry(t, Options{SkipSetup: true}, func(publish func(string, string) error) { withDraftCatalogue(t, publish) })
	reg.Release()
	g := a.get
	test.Tap(findButton(g.content, "Get its EAGLE draft (39.1 KiB)"))
	waitFor(t, "the draft's pull", func() bool { return !g.busy() })
	if ds, _ := pull.Drafts(dir); len(ds) != 1 || !strings.HasPrefix(g.status.Text, "Pulled the EAGLE-3 draft") {
		t.Fatalf("%q; drafts %+v", g.status.Text, ds)
	}
	g.name.SetText("hf.co/org/none")
	test.Tap(g.pull)
	waitFor(t, "the failed pull", func() bool { return !g.busy() })
	if !strings.Contains(g.status.Text, "not found (404)") || strings.Contains(g.status.Text, "\n") || g.status.Importance != widget.DangerImportance {
		t.Errorf("a repository that is not there: %q", g.status.Text)
	}
}

// Every draft the catalogue lists is a Hugging Face repository named
// alone, as pull reads a draft's name, for a model the catalogue lists.
func TestCatalogueDrafts(t *testing.T) {
	n := 0
	for _, m := range catalog {
		if m.Draft.Name == "" {
			continue
		}
		n++
		r, err := pull.Parse(m.Draft.Name)
		if err != nil || !r.HF() || r.File != "" || r.String() != m.Draft.Name+":latest" || m.Draft.Size == 0 || m.Draft.About == "" {
			t.Errorf("%s: draft %+v (%v)", m.Name, m.Draft, err)
		}
		if d, ok := draftFor("registry.ollama.ai/library/" + m.Name); !ok || d != m.Draft {
			t.Errorf("%s: draftFor finds %+v", m.Name, d)
		}
	}
	if n == 0 {
		t.Error("the catalogue lists no draft")
	}
	if _, ok := draftFor("qwen2.5:0.5b"); ok {
		t.Error("a model without a published draft has one")
	}
}
