package pull

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pulled is dir with tiny:1b and qwen:0.5b pulled into it (the same GGUF
// file under two manifests with different params).
func pulledDir(t *testing.T) (string, []byte) {
	t.Helper()
	h := newHub(t)
	gguf := testModel(t)
	h.addModel("library/tiny:1b", gguf, map[string]any{"temperature": 0.5})
	h.addModel("team/other:v2", gguf[:len(gguf)-1000], nil)
	dir := t.TempDir()
	o, _ := h.opts(dir, nil)
	for _, n := range []string{"tiny:1b", "team/other:v2"} {
		if _, err := Pull(pullCtx(t), n, o); err != nil {
			t.Fatal(err)
		}
	}
	return dir, gguf
}

func names(ms []Model) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.Name)
	}
	return strings.Join(s, " ")
}

func TestListFind(t *testing.T) {
	dir, gguf := pulledDir(t)
	ms, err := List(dir)
	if err != nil || names(ms) != "team/other:v2 tiny:1b" {
		t.Fatalf("List = %q, %v", names(ms), err)
	}
	for _, spelling := range []string{"tiny:1b", "TINY:1B", "library/tiny:1b", "registry.ollama.ai/library/tiny:1b"} {
		m, ok, err := Find(dir, spelling)
		if err != nil || !ok || m.Name != "tiny:1b" || m.Size != int64(len(gguf)) || m.Params["temperature"] != 0.5 {
			t.Errorf("Find(%q) = %+v %v %v", spelling, m, ok, err)
		}
	}
	if _, ok, err := Find(dir, "tiny"); ok || err != nil { // tiny is tiny:latest, not pulled
		t.Errorf("Find(tiny) = %v %v", ok, err)
	}
	if _, _, err := Find(dir, "../x"); err == nil {
		t.Error("Find of a bad name gave no error")
	}
	// A folder that is not there, or not Dovetail's, lists nothing.
	if ms, err := List(filepath.Join(dir, "none")); err != nil || len(ms) != 0 {
		t.Errorf("List(none) = %v %v", ms, err)
	}
}

// A copy is a second name for the same file; removing one name keeps
// the file for the other, removing both removes it.
func TestCopyRemove(t *testing.T) {
	dir, _ := pulledDir(t)
	orig, _, _ := Find(dir, "tiny:1b")
	if err := Copy(dir, "tiny:1b", "mine:fav"); err != nil {
		t.Fatal(err)
	}
	cp, ok, err := Find(dir, "mine:fav")
	if !ok || err != nil || cp.Path != orig.Path || cp.Params["temperature"] != 0.5 {
		t.Fatalf("copy = %+v %v %v (original %s)", cp, ok, err, orig.Path)
	}
	if err := Copy(dir, "nosuch:1", "x:1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Copy of a model not pulled: %v", err)
	}
	if err := Remove(dir, "tiny:1b"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(orig.Path); err != nil {
		t.Fatal("removing one name removed the file the copy uses")
	}
	if err := Remove(dir, "MINE:fav"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(orig.Path); !os.IsNotExist(err) {
		t.Errorf("the file outlived its last name: %v", err)
	}
	if ms, _ := List(dir); names(ms) != "team/other:v2" {
		t.Errorf("left: %q", names(ms))
	}
	if _, err := os.Stat(filepath.Join(dir, "manifests", ollamaHost, "library")); !os.IsNotExist(err) {
		t.Errorf("empty manifest folders left: %v", err)
	}
	if err := Remove(dir, "tiny:1b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("removing twice: %v", err)
	}
}

// Remove deletes only a name recorded in the folder: never a path, a
// file Dovetail did not download, or another program's store.
func TestRemoveRefuses(t *testing.T) {
	dir, _ := pulledDir(t)
	outside := filepath.Join(t.TempDir(), "keep.gguf")
	os.WriteFile(outside, []byte("GGUF mine"), 0o644)
	beside := filepath.Join(dir, "blobs", "notes.gguf")
	os.WriteFile(beside, []byte("GGUF mine"), 0o644)
	for _, name := range []string{outside, "../keep.gguf", "../../" + filepath.Base(outside), beside, "blobs/notes.gguf",
		"notes.gguf", "/etc/passwd", "..", "tiny:1b/../../x"} {
		if err := Remove(dir, name); err == nil {
			t.Errorf("Remove(%q) succeeded", name)
		}
	}
	for _, p := range []string{outside, beside} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s is gone", p)
		}
	}
	// A symbolic link planted in manifests/ is not followed.
	link := filepath.Join(dir, "manifests", ollamaHost, "library", "evil")
	os.MkdirAll(filepath.Dir(link), 0o755)
	os.Symlink(filepath.Dir(outside), link)
	if err := Remove(dir, "evil:keep.gguf"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove through a link: %v", err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Error("a link led Remove outside the folder")
	}
	// ollama's own store (no marker) is not Dovetail's: nothing is removed.
	ollama := t.TempDir()
	mf := filepath.Join(ollama, "manifests", ollamaHost, "library", "llama3", "8b")
	os.MkdirAll(filepath.Dir(mf), 0o755)
	os.WriteFile(mf, []byte(`{"layers":[]}`), 0o644)
	if err := Remove(ollama, "llama3:8b"); err == nil || !strings.Contains(err.Error(), "not a Dovetail models folder") {
		t.Errorf("Remove in ollama's store: %v", err)
	}
	if _, err := os.Stat(mf); err != nil {
		t.Error("ollama's manifest is gone")
	}
	if ms, _ := List(ollama); len(ms) != 0 {
		t.Errorf("ollama's store listed as pulled: %v", ms)
	}
}

// Pulling a name again under another case replaces the model, not adds one.
func TestPullReplacesName(t *testing.T) {
	dir, _ := pulledDir(t)
	if err := Copy(dir, "team/other:v2", "TINY:1b"); err != nil {
		t.Fatal(err)
	}
	ms, _ := List(dir)
	if names(ms) != "TINY:1b team/other:v2" {
		t.Errorf("List = %q", names(ms))
	}
	// The file only tiny:1b used went with it.
	ents, _ := os.ReadDir(filepath.Join(dir, "blobs"))
	if len(ents) != 1 {
		t.Errorf("blobs = %d, want 1", len(ents))
	}
}

func TestDir(t *testing.T) {
	d := t.TempDir()
	t.Setenv("DOVETAIL_MODELS", d)
	if got, err := Dir(); err != nil || got != d {
		t.Errorf("Dir() = %q %v, want $DOVETAIL_MODELS %q", got, err, d)
	}
	t.Setenv("DOVETAIL_MODELS", "")
	t.Setenv("XDG_DATA_HOME", d)
	if got, err := Dir(); err != nil || got != filepath.Join(d, "dovetail", "models") {
		t.Errorf("Dir() = %q %v", got, err)
	}
}
