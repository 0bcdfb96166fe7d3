package cli

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"dovetail/cpu"
	"dovetail/engine"
	"dovetail/internal/golden"
	"dovetail/models/draft"
)

// quickAdapt trains on little and publishes every run: a test sees
// versions come quickly. The trainer runs at normal priority: an idle one
// could wait for as long as other tests keep the cores busy.
func quickAdapt() adaptSettings {
	s := defaultAdaptSettings()
	s.idle = false
	s.cfg.Window, s.cfg.Batch, s.cfg.Steps, s.cfg.HeldOut, s.cfg.MinGain = 8, 4, 2, 2, -1
	s.cfg.Control.MinRecords = 32
	s.saveEvery = 0
	return s
}

// adaptUntilPublished decodes prompts through a's drafter until it has
// published a version.
func adaptUntilPublished(t *testing.T, a *adaptive, lm *loaded, target *cpu.Target) {
	t.Helper()
	for i := 0; i < 60 && a.adapter.Stats().Published == 0; i++ {
		req := engine.Request{Prompt: lm.Tok.Encode("Once upon a time, a little girl", true, false), MaxTokens: 48,
			Drafter: namedDrafter{a.drafter, a.name, ""}, Tree: engine.LaptopTree}
		if _, err := engine.Generate(context.Background(), target, req, func(int) error { return nil }); err != nil {
			t.Fatal(err)
		}
		a.drafter.Finish()
	}
	if a.adapter.Stats().Published == 0 {
		t.Fatal("nothing published after 60 requests")
	}
}

// A draft adapted from scratch (day 0) is saved at exit under the
// target's fingerprint, found by the next start with its version and τ
// history and the same weights, and listed by `dovetail drafts`; `drafts
// rm` deletes it.
func TestAdaptedDraftRoundTrip(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	lm, err := loadModel(golden.ModelPath("stories260K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Model.Close()
	pool := cpu.NewPool(2)
	defer pool.Close()
	target := cpu.NewTarget(lm.Model, pool, 0)
	if ck, _ := savedDraft(lm, os.Stderr); ck != nil {
		t.Fatal("a saved draft before any was saved")
	}
	var warn bytes.Buffer
	a, err := newAdaptive(nil, "", lm, pool, 0, true, quickAdapt(), &warn)
	if err != nil {
		t.Fatal(err)
	}
	adaptUntilPublished(t, a, lm, target)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	version := a.learner.Version()
	ck, where := savedDraft(lm, &warn)
	if ck == nil || warn.Len() > 0 {
		t.Fatalf("adapted draft not found after exit (%s)", warn.String())
	}
	if ck.Meta[metaVersion] != strconv.Itoa(version) || ck.Meta[metaStartedAs] != "untrained" || ck.Meta[metaTauHistory] == "" {
		t.Fatalf("saved draft meta %v, kept version %d", ck.Meta, version)
	}
	// The text memory was saved beside it.
	saved := a.adapter.Memory().Marshal(lm.Name)
	if a.adapter.Memory().Len() == 0 {
		t.Fatal("nothing remembered after decoding")
	}
	if onDisk, err := os.ReadFile(memoryPath(where)); err != nil || !bytes.Equal(onDisk, saved) {
		t.Fatalf("text memory on disk (%v) differs from the one at exit", err)
	}
	// The next start drafts with those weights, remembers that text, and
	// goes on counting.
	b, err := newAdaptive(ck, where, lm, pool, 0, true, quickAdapt(), &warn)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.adapter.Memory().Marshal(lm.Name), saved) || warn.Len() > 0 {
		t.Fatalf("the text memory did not come back (%s)", warn.String())
	}
	if b.learner.Version() != version {
		t.Fatalf("reloaded draft is version %d, saved %d", b.learner.Version(), version)
	}
	again := b.learner.Checkpoint(ck.Fingerprint, ck.TargetName)
	for name, v := range ck.Tensors {
		if !slices.Equal(again.Tensors[name], v) {
			t.Fatalf("tensor %s differs after the round trip", name)
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := runCLI(t, "drafts")
	if code != 0 || !strings.Contains(out, "stories260K-f32.gguf") || !strings.Contains(out, ck.Fingerprint) {
		t.Fatalf("drafts: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code := runCLI(t, "drafts", "rm", "nosuchmodel.gguf"); code != 1 || !strings.Contains(errOut, "no saved draft") {
		t.Fatalf("drafts rm of nothing: exit %d, %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, "drafts", "rm", "stories260K-f32.gguf"); code != 0 {
		t.Fatalf("drafts rm: exit %d, %s", code, errOut)
	}
	if ck, _ := savedDraft(lm, &warn); ck != nil {
		t.Fatal("the draft is still found after drafts rm")
	}
	if _, err := os.Stat(memoryPath(where)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the text memory is still there after drafts rm: %v", err)
	}
}

// A corrupted saved draft is never loaded: --draft auto warns and starts
// without it, and saving the adapted one moves the bad file aside rather
// than destroying it.
func TestCorruptedSavedDraftIgnored(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	lm, err := loadModel(golden.ModelPath("stories260K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Model.Close()
	path, err := userDraftPath(lm)
	if err != nil {
		t.Fatal(err)
	}
	// A real draft for this target with one byte flipped in its tensors.
	d := draft.ForTarget(lm.Model.Config, 1, 0)
	ck := &draft.Checkpoint{Config: d, Fingerprint: draft.Fingerprint(lm.Model.File), TargetName: lm.Name, Tensors: map[string][]float32{}, Meta: map[string]string{}}
	for _, s := range d.Shapes() {
		ck.Tensors[s.Name] = make([]float32, s.Size())
	}
	if err := ck.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	raw[len(raw)-10] ^= 0x40
	os.WriteFile(path, raw, 0o644)

	var warn bytes.Buffer
	if got, _ := savedDraft(lm, &warn); got != nil || !strings.Contains(warn.String(), "ignoring the saved draft") {
		t.Fatalf("corrupted draft: loaded %v, warning %q", got != nil, warn.String())
	}
	r := runJSON(t, "-m", golden.ModelPath("stories260K-f32.gguf"), "-p", "Once", "--temp", "0", "-n", "4")
	if r.Stats.Draft != "dgf:untrained" {
		t.Fatalf("run with a corrupted saved draft drafted with %q", r.Stats.Draft)
	}

	pool := cpu.NewPool(2)
	defer pool.Close()
	// And a text memory that is not one.
	badMemory := []byte("DVTXMEM1 but then garbage")
	os.WriteFile(memoryPath(path), badMemory, 0o644)
	warn.Reset()
	a, err := newAdaptive(nil, "", lm, pool, 0, true, quickAdapt(), &warn)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(warn.String(), "ignoring the saved text memory") || a.adapter.Memory().Len() != 0 {
		t.Fatalf("damaged text memory: warning %q, %d tokens loaded", warn.String(), a.adapter.Memory().Len())
	}
	adaptUntilPublished(t, a, lm, cpu.NewTarget(lm.Model, pool, 0))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if kept, err := os.ReadFile(path + ".corrupt"); err != nil || !bytes.Equal(kept, raw) {
		t.Fatalf("the corrupted draft was not kept aside: %v", err)
	}
	if kept, err := os.ReadFile(memoryPath(path) + ".corrupt"); err != nil || !bytes.Equal(kept, badMemory) {
		t.Fatalf("the damaged text memory was not kept aside: %v", err)
	}
	data, err := os.ReadFile(memoryPath(path))
	if err == nil {
		_, _, err = engine.ParseMemory(data, lm.Model.Config.Vocab)
	}
	if err != nil {
		t.Fatalf("no loadable text memory saved over the damaged one: %v", err)
	}
	if got, _ := savedDraft(lm, &warn); got == nil {
		t.Fatal("the adapted draft was not saved over the corrupted one")
	}
	out, _, _ := runCLI(t, "drafts")
	if !strings.Contains(out, "(unreadable)") {
		t.Fatalf("drafts does not show the unreadable file:\n%s", out)
	}
}

// The text memory is saved at exit though no better draft was (a short
// run), and drafts lists it under its target and removes it.
func TestMemoryAloneListed(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	model := golden.ModelPath("stories260K-f32.gguf")
	r := runJSON(t, "-m", model, "-p", "Once upon a time", "--temp", "0", "-n", "8")
	if r.Stats.Draft != "dgf:untrained" {
		t.Fatalf("drafted with %q", r.Stats.Draft)
	}
	out, errOut, code := runCLI(t, "drafts")
	if code != 0 || !strings.Contains(out, "stories260K-f32.gguf") || !strings.Contains(out, "MEMORY") {
		t.Fatalf("drafts: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(out, "unreadable") {
		t.Fatalf("drafts:\n%s", out)
	}
	if _, errOut, code := runCLI(t, "drafts", "rm", "stories260K-f32.gguf"); code != 0 {
		t.Fatalf("drafts rm: exit %d, %s", code, errOut)
	}
	if out, _, _ := runCLI(t, "drafts"); !strings.Contains(out, "no saved drafts") {
		t.Fatalf("after drafts rm:\n%s", out)
	}
}
