package runner

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"dovetail/app/runner/store"
	"dovetail/engine/adapt"
	"dovetail/engine/tree"
	"dovetail/models/draft"
)

// adaptUntilPublished decodes prompts until the runner's draft has
// published a version.
func adaptUntilPublished(t *testing.T, r *Runner) {
	t.Helper()
	for i := 0; i < 60; i++ {
		if st, _ := r.Adaptation(); st.Published > 0 {
			return
		}
		greedy(t, r, "Once upon a time, a little girl", 48)
	}
	t.Fatal("nothing published after 60 requests")
}

// A draft adapted from scratch (day 0) is saved at Close under the
// target's fingerprint with its text memory (0600), and the next runner
// drafts with the same weights, version and τ history, and remembers the
// same text.
func TestAdaptedDraftRoundTrip(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	o := options(t)
	o.Adapt, o.Plan, o.Greedy, o.Tree = quickAdapt(), false, true, tree.Laptop
	r := start(t, m, o)
	if info := r.Draft(); info.Name != "dgf:untrained" || info.Adapt != adapt.Background {
		t.Fatalf("a target without a draft drafts with %+v", info)
	}
	adaptUntilPublished(t, r)
	version := adaptVersion(t, r)
	saved := r.draft.adaptive.adapter.Memory().Marshal(m.Name)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	st := o.Store
	ck, err := draft.Load(st.DraftPath(m.Fingerprint))
	if err != nil {
		t.Fatalf("adapted draft not saved: %v", err)
	}
	// The trainer may publish again between the read and Close: the saved
	// version is the last one kept, at least the one read.
	savedVersion, err := strconv.Atoi(ck.Meta[store.MetaVersion])
	if err != nil || savedVersion < version || ck.Meta[store.MetaStartedAs] != "untrained" || ck.Meta[store.MetaTauHistory] == "" {
		t.Fatalf("saved draft meta %v, kept version %d", ck.Meta, version)
	}
	version = savedVersion
	onDisk, err := os.ReadFile(st.MemoryPath(m.Fingerprint))
	if err != nil || !bytes.Equal(onDisk, saved) {
		t.Fatalf("text memory on disk (%v) differs from the one at exit", err)
	}
	if fi, _ := os.Stat(st.MemoryPath(m.Fingerprint)); fi.Mode().Perm() != 0o600 {
		t.Errorf("the text memory, the user's text, is %v", fi.Mode())
	}
	if fi, _ := os.Stat(st.DraftsDir()); fi.Mode().Perm() != 0o700 {
		t.Errorf("the drafts directory is %v", fi.Mode())
	}

	r2 := start(t, m, o)
	if info := r2.Draft(); info.Name != "dgf:"+st.DraftPath(m.Fingerprint) {
		t.Fatalf("the next runner drafts with %q", info.Name)
	}
	a := r2.draft.adaptive
	// Nothing is learned before a request: no shadow, no trainer yet.
	if a.learner.SetUp() {
		t.Error("the learner was set up before there was anything to learn")
	}
	if !bytes.Equal(a.adapter.Memory().Marshal(m.Name), saved) {
		t.Fatal("the text memory did not come back")
	}
	if v := adaptVersion(t, r2); v != version {
		t.Fatalf("reloaded draft is version %d, saved %d", v, version)
	}
	again, err := a.learner.Checkpoint(ck.Fingerprint, ck.TargetName)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range ck.Tensors {
		if !slices.Equal(again.Tensors[name], v) {
			t.Fatalf("tensor %s differs after the round trip", name)
		}
	}
	if n := r2.Notices(); len(n) > 0 {
		t.Errorf("notices: %v", n)
	}
}

// A corrupted saved draft is never loaded: auto moves it aside as it
// opens, warns once and starts without it, and the adapted one is saved
// in its place; a damaged text memory likewise.
func TestCorruptedSavedDraftIgnored(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	o := options(t)
	o.Adapt, o.Plan, o.Greedy, o.Tree = quickAdapt(), false, true, tree.Laptop
	st := o.Store
	path := st.DraftPath(m.Fingerprint)
	// A real draft for this target with one byte flipped in its tensors.
	d := draft.ForTarget(m.Config(), 1, 0)
	ck := &draft.Checkpoint{Config: d, Fingerprint: m.Fingerprint, TargetName: m.Name, Tensors: map[string][]float32{}, Meta: map[string]string{}}
	for _, s := range d.Shapes() {
		ck.Tensors[s.Name] = make([]float32, s.Size())
	}
	if _, _, err := st.Install(ck); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	raw[len(raw)-10] ^= 0x40
	os.WriteFile(path, raw, 0o644)
	badMemory := []byte("DVTXMEM1 but then garbage")
	os.WriteFile(st.MemoryPath(m.Fingerprint), badMemory, 0o600)

	r := start(t, m, o)
	notes := r.Notices()
	if r.Draft().Name != "dgf:untrained" || !hasNotice(notes, "ignoring the saved draft") || !hasNotice(notes, "ignoring the saved text memory") {
		t.Fatalf("corrupted draft and memory: drafting with %q, notices %v", r.Draft().Name, notes)
	}
	if n := r.draft.adaptive.adapter.Memory().Len(); n != 0 {
		t.Fatalf("%d tokens loaded from a damaged memory", n)
	}
	if _, err := os.Stat(path + ".corrupt"); err != nil || !hasNotice(notes, "moved it to "+path+".corrupt") {
		t.Fatalf("the corrupted draft was not set aside as it opened: %v, notices %v", err, notes)
	}
	adaptUntilPublished(t, r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if kept, err := os.ReadFile(path + ".corrupt"); err != nil || !bytes.Equal(kept, raw) {
		t.Fatalf("the corrupted draft was not kept aside: %v", err)
	}
	if kept, err := os.ReadFile(st.MemoryPath(m.Fingerprint) + ".corrupt"); err != nil || !bytes.Equal(kept, badMemory) {
		t.Fatalf("the damaged text memory was not kept aside: %v", err)
	}
	data, err := os.ReadFile(st.MemoryPath(m.Fingerprint))
	if err == nil {
		_, _, err = adapt.ParseMemory(data, m.Config().Vocab)
	}
	if err != nil {
		t.Fatalf("no loadable text memory saved over the damaged one: %v", err)
	}
	if _, err := draft.Load(path); err != nil {
		t.Fatalf("the adapted draft was not saved over the corrupted one: %v", err)
	}
}

// A truncated saved draft that nothing saves over (no adaptation) is set
// aside the first time it fails to load, with one warning: the next start
// neither warns nor finds it.
func TestTruncatedDraftSetAsideOnce(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	o := options(t)
	o.Adapt.Mode, o.Plan = adapt.Off, false
	path := o.Store.DraftPath(m.Fingerprint)
	d := draft.ForTarget(m.Config(), 1, 0)
	ck := &draft.Checkpoint{Config: d, Fingerprint: m.Fingerprint, TargetName: m.Name, Tensors: map[string][]float32{}, Meta: map[string]string{}}
	for _, s := range d.Shapes() {
		ck.Tensors[s.Name] = make([]float32, s.Size())
	}
	if _, _, err := o.Store.Install(ck); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	os.WriteFile(path, raw[:len(raw)/2], 0o600)
	warnings := func() []Notice {
		r := start(t, m, o)
		var w []Notice
		for _, n := range r.Notices() {
			if n.Warning {
				w = append(w, n)
			}
		}
		r.Close()
		return w
	}
	if w := warnings(); len(w) != 1 || !strings.Contains(w[0].Text, "truncated") || !strings.Contains(w[0].Text, "moved it to "+path+".corrupt") {
		t.Fatalf("first start: %v", w)
	}
	if w := warnings(); len(w) != 0 {
		t.Errorf("second start warns again: %v", w)
	}
	if kept, err := os.ReadFile(path + ".corrupt"); err != nil || !bytes.Equal(kept, raw[:len(raw)/2]) {
		t.Errorf("the truncated draft was not kept aside: %v", err)
	}
}

// adaptVersion is the kept version, read under the adapter's lock (the
// learner itself belongs to the training goroutine).
func adaptVersion(t *testing.T, r *Runner) int {
	t.Helper()
	st, ok := r.Adaptation()
	if !ok {
		t.Fatal("the runner does not adapt")
	}
	return st.Version
}

func hasNotice(ns []Notice, text string) bool {
	for _, n := range ns {
		if strings.Contains(n.Text, text) {
			return true
		}
	}
	return false
}

// With saving off, nothing is written however much the draft learns.
func TestAdaptNoSave(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	o := options(t)
	o.Adapt, o.Plan, o.Tree = quickAdapt(), false, tree.Laptop
	o.Adapt.Save = false
	r := start(t, m, o)
	adaptUntilPublished(t, r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if ds, err := o.Store.Drafts(); err != nil || len(ds) != 0 {
		t.Errorf("saved %v (%v) with saving off", ds, err)
	}
}

// A newer adapted draft keeps the one it replaces restorable; the text
// memory clears here and on disk; learning pauses and resumes.
func TestAdaptControls(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	o := options(t)
	o.Adapt, o.Plan, o.Greedy, o.Tree = quickAdapt(), false, true, tree.Laptop
	r := start(t, m, o)
	adaptUntilPublished(t, r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	first, _ := os.ReadFile(o.Store.DraftPath(m.Fingerprint))
	r = start(t, m, o)
	before := adaptVersion(t, r)
	for i := 0; i < 60 && adaptVersion(t, r) == before; i++ {
		greedy(t, r, "Once upon a time, a little boy", 48)
	}
	r.PauseLearning(true)
	if st, ok := r.Adaptation(); !ok || !st.Paused {
		t.Errorf("not paused: %+v", st)
	}
	if err := r.ClearMemory(); err != nil || r.draft.adaptive.adapter.Memory().Len() != 0 {
		t.Fatalf("clear: %v, %d tokens left", err, r.draft.adaptive.adapter.Memory().Len())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(o.Store.MemoryPath(m.Fingerprint)); err == nil {
		t.Error("a cleared memory was saved again")
	}
	if prev, err := os.ReadFile(o.Store.PrevPath(m.Fingerprint)); err != nil || !bytes.Equal(prev, first) {
		t.Fatalf("the replaced draft was not kept: %v", err)
	}
	if err := o.Store.Restore(m.Fingerprint); err != nil {
		t.Fatal(err)
	}
	if now, _ := os.ReadFile(o.Store.DraftPath(m.Fingerprint)); !bytes.Equal(now, first) {
		t.Error("restore did not bring the earlier draft back")
	}
}
