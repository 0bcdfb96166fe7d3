package desktop

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/storage"

	"dovetail/app/runner"
	"dovetail/app/runner/discover"
	"dovetail/app/runner/store"
	"dovetail/assets"
	"dovetail/internal/golden"
)

// ollamaStore is an ollama store holding one model: a manifest naming
// the blob, a copy of model.
func ollamaStore(t *testing.T, model string) string {
	t.Helper()
	dir := t.TempDir()
	copyModel(t, model, filepath.Join(dir, "blobs"), "sha256-aaaa")
	st, _ := os.Stat(filepath.Join(dir, "blobs", "sha256-aaaa"))
	m := filepath.Join(dir, "manifests", "registry.ollama.ai", "library", "tiny", "q4")
	os.MkdirAll(filepath.Dir(m), 0o755)
	manifest := `{"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:aaaa","size":` +
		strconv.FormatInt(st.Size(), 10) + `}]}`
	if err := os.WriteFile(m, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rowFor is the picker's row of the model named name.
func rowFor(t *testing.T, a *App, name string) string {
	t.Helper()
	for _, o := range a.chat.pick.sel.Options {
		if strings.HasPrefix(o, name+" ") {
			return o
		}
	}
	t.Fatalf("the picker has no %s: %q", name, a.chat.pick.sel.Options)
	return ""
}

// The picker shows each model's name, parameters, quantization and size,
// whatever its source, and labels a model without a chat template a
// completion model.
func TestPickerRows(t *testing.T) {
	files, lms := t.TempDir(), t.TempDir()
	q8 := copyModel(t, "tinystories656K-Q8_0.gguf", files, "tinystories656K-Q8_0.gguf")
	chatModel := filepath.Join(lms, "pub", "repo", "chat-f32.gguf")
	withChatTemplate(t, "stories260K-f32.gguf", chatModel)
	a := newTestApp(t, Options{Places: &discover.Places{Paths: []string{files}, Ollama: []string{ollamaStore(t, "tinystories656K-Q4_0.gguf")}, LMStudio: []string{lms}}})

	size := func(path string) string {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return runner.HumanBytes(uint64(st.Size()))
	}
	embedded := runner.HumanBytes(uint64(len(assets.DefaultModel)))
	cases := []struct{ name, want string }{
		{"TinyStories-656K (embedded)", "656K params · Q8_0 · " + embedded + " · completion model"},
		{"tinystories656K-Q8_0.gguf", "656K params · Q8_0 · " + size(q8) + " · completion model"},
		{"tiny:q4 (ollama)", "656K params · Q4_0 · " + size(golden.ModelPath("tinystories656K-Q4_0.gguf")) + " · completion model"},
		{"pub/repo/chat-f32.gguf (LM Studio)", "293K params · F32 · " + size(chatModel)},
	}
	for _, c := range cases {
		row := rowFor(t, a, c.name)
		if row != c.name+" — "+c.want {
			t.Errorf("row %q, want %q", row, c.name+" — "+c.want)
		}
	}
	if n := len(a.chat.pick.sel.Options); n != len(cases) {
		t.Errorf("%d rows: %q", n, a.chat.pick.sel.Options)
	}
}

// A file opened (typed here) loads, and the picker offers it again after
// a restart; one that went away meanwhile leaves the others standing.
func TestOpenedRemembered(t *testing.T) {
	st := store.At(t.TempDir())
	dir := t.TempDir()
	keep := copyModel(t, "stories260K-f32.gguf", dir, "keep.gguf")
	gone := copyModel(t, "stories260K-f32.gguf", dir, "gone.gguf")
	a := started(t, Options{Store: st})
	for _, path := range []string{keep, gone} {
		// Enter in the box submits; called as the entry calls it, since
		// under the test driver the entry's own redraw after Enter would
		// race the load's.
		a.chat.pick.path.SetText(path)
		a.chat.pick.path.OnSubmitted(a.chat.pick.path.Text)
		waitLoaded(t, a)
		if _, m := a.sess.loaded(); m.Path != path {
			t.Fatalf("typed %s, loaded %s", path, m.Path)
		}
	}
	a.Close()
	os.Remove(gone)
	// The last model loaded was gone.gguf: the restart loads nothing but
	// still offers keep.gguf.
	b := newTestApp(t, Options{Store: st, SkipSetup: true})
	rowFor(t, b, "keep.gguf")
	for _, o := range b.chat.pick.sel.Options {
		if strings.HasPrefix(o, "gone.gguf") {
			t.Errorf("a file that went away is offered: %q", o)
		}
	}
	if p := loadPrefs(st); !slices.Equal(p.Opened, []string{gone, keep}) {
		t.Errorf("remembered %q", p.Opened)
	}
}

// A typed path that is no file says so in one line and loads nothing.
func TestTypedPathMissing(t *testing.T) {
	a := newTestApp(t, Options{SkipSetup: true})
	missing := filepath.Join(t.TempDir(), "nope.gguf")
	a.chat.pick.path.SetText(missing)
	a.chat.pick.path.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
	want := "There is no file or folder at " + missing + ": check the path and try again"
	if !a.chat.problem.Visible() || a.chat.problem.Text != want || a.chat.isLoading() {
		t.Errorf("problem %q (shown %v), loading %v", a.chat.problem.Text, a.chat.problem.Visible(), a.chat.isLoading())
	}
	if p := a.currentPrefs(); len(p.Opened) != 0 {
		t.Errorf("a missing file was remembered: %q", p.Opened)
	}
}

// Open… lists GGUF files and not others, starting in the folder opened
// last.
func TestOpenDialogFilter(t *testing.T) {
	st := store.At(t.TempDir())
	dir := t.TempDir()
	copyModel(t, "stories260K-f32.gguf", dir, "story.gguf")
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("x"), 0o644)
	p := defaultPrefs()
	p.Opened = []string{dir}
	savePrefs(st, p)
	a := newTestApp(t, Options{Store: st, SkipSetup: true})
	a.chat.pick.showOpen()
	shown := strings.Join(labels(topOverlay(t, a)), "|")
	// fyne's chooser shows names without their extension.
	if !strings.Contains(shown, "|story|") || strings.Contains(shown, "notes") {
		t.Errorf("the file chooser shows %q", shown)
	}
}

// A GGUF file dropped on the window loads; anything else says what is
// wanted.
func TestDropOpens(t *testing.T) {
	a := started(t, Options{})
	dir := t.TempDir()
	txt := filepath.Join(dir, "notes.txt")
	os.WriteFile(txt, []byte("x"), 0o644)
	a.dropped(fyne.NewPos(10, 10), []fyne.URI{storage.NewFileURI(txt)})
	if !a.chat.problem.Visible() || !strings.Contains(a.chat.problem.Text, ".gguf") || a.chat.isLoading() {
		t.Errorf("a dropped text file: %q", a.chat.problem.Text)
	}
	path := copyModel(t, "stories260K-f32.gguf", dir, "Dropped.GGUF")
	a.dropped(fyne.NewPos(10, 10), []fyne.URI{storage.NewFileURI(txt), storage.NewFileURI(path)})
	waitLoaded(t, a)
	if _, m := a.sess.loaded(); m.Path != path || a.chat.problem.Visible() {
		t.Errorf("dropped %s, loaded %s, problem %q", path, m.Path, a.chat.problem.Text)
	}
	rowFor(t, a, "Dropped.GGUF")
}
