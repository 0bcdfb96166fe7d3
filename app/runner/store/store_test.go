package store

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"dovetail/engine/adapt"
	"dovetail/models/draft"
)

var shape = draft.Config{Hidden: 8, Blocks: 1, Heads: 2, KVHeads: 1, HeadDim: 4, FFN: 12, Vocab: 16, Context: 64,
	RopeTheta: 10000, RMSEps: 1e-5}

// checkpoint is a draft for the target fp named target, its weights all v.
func checkpoint(fp, target string, v float32) *draft.Checkpoint {
	ck := &draft.Checkpoint{Config: shape, Fingerprint: fp, TargetName: target, Tensors: map[string][]float32{},
		Meta: map[string]string{}}
	for _, s := range shape.Shapes() {
		w := make([]float32, s.Size())
		for i := range w {
			w[i] = v
		}
		ck.Tensors[s.Name] = w
	}
	return ck
}

func fp(c byte) string { return strings.Repeat(string(c), 32) }

// install saves a draft and a text memory for a target.
func install(t *testing.T, s *Store, fp, target string) {
	t.Helper()
	if _, _, err := s.Install(checkpoint(fp, target, 1)); err != nil {
		t.Fatal(err)
	}
	m := adapt.NewTextMemory(64)
	m.Append([]int{1, 2, 3})
	if err := s.WriteFile(s.MemoryPath(fp), true, func(w io.Writer) error { _, err := w.Write(m.Marshal(target)); return err }); err != nil {
		t.Fatal(err)
	}
}

// A name removes only what it names unambiguously: a whole fingerprint, or
// a target name exactly one entry has. Two different models both called
// x.gguf, or the first characters of a fingerprint, name nothing.
func TestFindUnambiguous(t *testing.T) {
	s := At(t.TempDir())
	install(t, s, fp('a'), "x.gguf")
	install(t, s, fp('b'), "x.gguf")
	install(t, s, fp('c'), "y.gguf")
	for _, c := range []struct {
		name       string
		want       string // fingerprint, or "" for an error
		candidates int
	}{
		{"x.gguf", "", 2},
		{"/models/x.gguf", "", 2},
		{"y.gguf", fp('c'), 0},
		{"/elsewhere/y.gguf", fp('c'), 0},
		{fp('a'), fp('a'), 0},
		{"aaaa", "", 1},
		{"z.gguf", "", 0},
		{"", "", 0},
	} {
		d, err := s.Find(c.name)
		var ae *AmbiguousError
		switch {
		case c.want != "" && (err != nil || d.Fingerprint != c.want):
			t.Errorf("Find(%q) = %s, %v; want %s", c.name, d.Fingerprint, err, c.want)
		case c.want == "" && !errors.As(err, &ae):
			t.Errorf("Find(%q) = %s, %v; want an AmbiguousError", c.name, d.Fingerprint, err)
		case c.want == "" && len(ae.Candidates) != c.candidates:
			t.Errorf("Find(%q): %d candidates, want %d: %v", c.name, len(ae.Candidates), c.candidates, err)
		}
	}
	// The error lists the candidates by fingerprint.
	_, err := s.Find("x.gguf")
	if msg := err.Error(); !strings.Contains(msg, fp('a')) || !strings.Contains(msg, fp('b')) {
		t.Errorf("ambiguity not listed: %v", err)
	}
	// Removing one removes its draft and memory, and nothing of the other.
	d, _ := s.Find(fp('a'))
	removed, err := s.Remove(d)
	if err != nil || len(removed) != 2 {
		t.Fatalf("removed %v, %v", removed, err)
	}
	for _, p := range []string{s.DraftPath(fp('b')), s.MemoryPath(fp('b')), s.DraftPath(fp('c'))} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s gone: %v", p, err)
		}
	}
	if d, err := s.Find("x.gguf"); err != nil || d.Fingerprint != fp('b') {
		t.Errorf("after removing one x.gguf the other is not found: %v", err)
	}
}

// Drafts lists drafts with their memories, a memory saved alone, and a
// file that does not load, which it does not hide.
func TestDraftsListing(t *testing.T) {
	s := At(t.TempDir())
	install(t, s, fp('a'), "x.gguf")
	m := adapt.NewTextMemory(64)
	m.Append([]int{4, 5, 6})
	if err := s.WriteFile(s.MemoryPath(fp('m')), true, func(w io.Writer) error { _, err := w.Write(m.Marshal("alone.gguf")); return err }); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.DraftPath(fp('z')), []byte("not a gguf"), 0o600); err != nil {
		t.Fatal(err)
	}
	ds, err := s.Drafts()
	if err != nil || len(ds) != 3 {
		t.Fatalf("%d entries, %v", len(ds), err)
	}
	by := map[string]Saved{}
	for _, d := range ds {
		by[d.Fingerprint] = d
	}
	if d := by[fp('a')]; d.Err != nil || d.Target != "x.gguf" || d.Memory == 0 || d.Size == 0 {
		t.Errorf("draft with memory: %+v", d)
	}
	if d := by[fp('m')]; d.Err != nil || d.Target != "alone.gguf" || d.Memory == 0 || d.Size != 0 {
		t.Errorf("memory alone: %+v", d)
	}
	if d := by[fp('z')]; d.Err == nil {
		t.Errorf("unreadable draft listed as readable: %+v", d)
	}
}

// An install keeps the draft it replaces, and Restore brings it back
// (and a second Restore the newer one again).
func TestInstallKeepsPrevious(t *testing.T) {
	s := At(t.TempDir())
	if _, replaced, err := s.Install(checkpoint(fp('a'), "x.gguf", 1)); err != nil || replaced {
		t.Fatalf("first install: replaced %v, %v", replaced, err)
	}
	if _, replaced, err := s.Install(checkpoint(fp('a'), "x.gguf", 2)); err != nil || !replaced {
		t.Fatalf("second install: replaced %v, %v", replaced, err)
	}
	weight := func() float32 {
		ck, err := draft.Load(s.DraftPath(fp('a')))
		if err != nil {
			t.Fatal(err)
		}
		return ck.Tensors[draft.NameW1][0]
	}
	if w := weight(); w != 2 {
		t.Fatalf("installed weight %v, want 2", w)
	}
	if ds, _ := s.Drafts(); len(ds) != 1 || !ds[0].Prev {
		t.Errorf("listing after a replacing install: %+v", ds)
	}
	if err := s.Restore(fp('a')); err != nil || weight() != 1 {
		t.Fatalf("restore: %v, weight %v", err, weight())
	}
	if err := s.Restore(fp('a')); err != nil || weight() != 2 {
		t.Fatalf("restore again: %v, weight %v", err, weight())
	}
	if err := s.Restore(fp('b')); err == nil {
		t.Error("restored a draft never installed")
	}
}

// What holds a user's text is 0600 in a 0700 directory, also where the
// directory existed before with a wider mode.
func TestPrivateFiles(t *testing.T) {
	s := At(t.TempDir())
	if err := os.MkdirAll(s.DraftsDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(s.DraftsDir(), 0o755)
	p := s.MemoryPath(fp('a'))
	if err := s.WriteFile(p, true, func(w io.Writer) error { _, err := w.Write([]byte("text")); return err }); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v", st.Mode())
	}
	if st, _ := os.Stat(s.DraftsDir()); st.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v", st.Mode())
	}
	conv := filepath.Join(s.ConversationsDir(), "c.json")
	if err := s.WriteFile(conv, true, func(w io.Writer) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(s.ConversationsDir()); st.Mode().Perm() != 0o700 {
		t.Errorf("conversations directory mode %v", st.Mode())
	}
}

// SetAside never overwrites a file set aside before: the second goes to
// .corrupt.2. Drafts lists both as set aside under their target's
// fingerprint, and Remove deletes them with the rest.
func TestSetAsideKeepsEarlier(t *testing.T) {
	s := At(t.TempDir())
	install(t, s, fp('a'), "x.gguf")
	path := s.DraftPath(fp('a'))
	var asides []string
	for _, content := range []string{"first bad", "second bad"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		aside, err := s.SetAside(path)
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(aside); string(b) != content {
			t.Errorf("%s holds %q, want %q", aside, b, content)
		}
		asides = append(asides, aside)
	}
	if asides[0] != path+".corrupt" || asides[1] != path+".corrupt.2" {
		t.Errorf("set aside as %v", asides)
	}
	if aside, err := s.SetAside(path); aside != "" || err != nil {
		t.Errorf("setting aside a file that is not there: %q, %v", aside, err)
	}
	ds, err := s.Drafts()
	if err != nil {
		t.Fatal(err)
	}
	var aside int
	for _, d := range ds {
		if d.Aside && d.Fingerprint == fp('a') && d.Err != nil {
			aside++
		}
	}
	if aside != 2 || len(ds) != 3 { // the two and the memory
		t.Errorf("listing: %+v", ds)
	}
	d, err := s.Find(fp('a'))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Remove(d); err != nil {
		t.Fatal(err)
	}
	if ds, _ := s.Drafts(); len(ds) != 0 {
		t.Errorf("left after Remove: %+v", ds)
	}
}
