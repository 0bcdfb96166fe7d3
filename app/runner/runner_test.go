package runner

import (
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"dovetail/assets"
	"dovetail/engine"
	"dovetail/engine/adapt"
	"dovetail/engine/tree"
	"dovetail/internal/golden"
	"dovetail/models/draft"
)

func TestOpenModel(t *testing.T) {
	m := open(t, "")
	if m.Name != assets.DefaultModelName || !m.Embedded() || m.Chat == nil || m.Kernels == "" || len(m.Fingerprint) != 32 {
		t.Errorf("embedded model: %+v", m)
	}
	f := open(t, "stories260K-f32.gguf")
	if f.Name != "stories260K-f32.gguf" || f.Embedded() || f.Path != golden.ModelPath("stories260K-f32.gguf") {
		t.Errorf("file model: name %q, path %q", f.Name, f.Path)
	}
	dir := t.TempDir()
	for path, want := range map[string]string{filepath.Join(dir, "none.gguf"): "none.gguf: no such file", dir: "is a directory"} {
		if _, err := OpenModel(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("OpenModel(%s): %v, want %q", path, err, want)
		}
	}
}

// zeroDraft writes a DGF draft of zero weights for m: it drafts badly,
// which must change nothing in the output.
func zeroDraft(t *testing.T, m *Model) string {
	c := draft.ForTarget(m.Config(), 1, 0)
	ck := &draft.Checkpoint{Config: c, Fingerprint: m.Fingerprint, TargetName: m.Name, Tensors: map[string][]float32{}, Meta: map[string]string{}}
	for _, s := range c.Shapes() {
		ck.Tensors[s.Name] = make([]float32, s.Size())
	}
	path := filepath.Join(t.TempDir(), "zero.gguf")
	if err := ck.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Every drafter kind drafts in every slot and leaves the greedy output as
// the target alone writes it, slots decoding side by side.
func TestDrafterKinds(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	o := options(t)
	o.Draft, o.Plan = DraftChoice{Kind: DraftNone}, false
	plain, _ := greedy(t, start(t, m, o), "Lily and Tom", 40)
	zero := zeroDraft(t, m)
	for _, c := range []struct {
		spec, name, adapt string
	}{
		{"ngram", "ngram", "off"},
		{"model:" + golden.ModelPath("stories260K-Q4_0-mixed.gguf"), "model:" + golden.ModelPath("stories260K-Q4_0-mixed.gguf"), "off"},
		{"dgf:" + zero, "dgf:" + zero, "off"},
		{"dgf:" + zero, "dgf:" + zero, "background"},
		{"scratch", "dgf:untrained", "per-request"},
		{"auto", "dgf:untrained", "background"},
		{"auto", "none", "off"},
	} {
		o := options(t)
		o.Draft, o.Plan, o.Slots, o.Greedy, o.Tree = mustDraft(t, c.spec), false, 2, true, tree.Laptop
		o.Adapt.Mode, _ = adapt.ParseMode(c.adapt)
		if o.Adapt.Mode == adapt.PerRequest {
			o.Slots = 1
		}
		r := start(t, m, o)
		info := r.Draft()
		if info.Name != c.name || (c.name != "none" && info.Adapt.String() != c.adapt && strings.HasPrefix(c.name, "dgf")) {
			t.Errorf("%s/%s: drafts with %+v, want %s", c.spec, c.adapt, info, c.name)
		}
		if strings.HasPrefix(c.name, "dgf") && !strings.HasPrefix(info.Device, "host") {
			t.Errorf("%s: a tiny draft runs on %q, want the host", c.spec, info.Device)
		}
		var wg sync.WaitGroup
		for i := range r.Slots() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out []int
				req := engine.Request{Prompt: m.Tok.Encode("Lily and Tom", true, false), MaxTokens: 40, Stop: m.Tok.IsEOG}
				st, err := r.Slot(i).Generate(context.Background(), req, func(tok int) error { out = append(out, tok); return nil })
				if err != nil {
					t.Error(err)
					return
				}
				if !slices.Equal(out, plain) {
					t.Errorf("%s/%s slot %d: %v, plain %v", c.spec, c.adapt, i, out, plain)
				}
				if (c.name == "none") != (st.Rounds == 0) {
					t.Errorf("%s/%s slot %d: %d speculative rounds", c.spec, c.adapt, i, st.Rounds)
				}
			}()
		}
		wg.Wait()
		if err := r.Close(); err != nil {
			t.Errorf("%s: close: %v", c.spec, err)
		}
	}
}

// A draft model of another vocabulary, a draft of another target and a
// bad option are refused with what was wrong (bad --draft values:
// TestParseChoices).
func TestDrafterErrors(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	other := open(t, "")
	for spec, want := range map[string]string{
		"model:" + golden.ModelPath("tinystories656K-f32.gguf"): "vocabularies differ",
		"dgf:" + zeroDraft(t, other):                            "another model",
	} {
		o := options(t)
		o.Draft = mustDraft(t, spec)
		if _, err := New(m, o); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", spec, err, want)
		}
	}
	o := options(t)
	o.Draft, o.Adapt.Mode = DraftChoice{Kind: DraftScratch}, adapt.Off
	if _, err := New(m, o); err == nil || !strings.Contains(err.Error(), "adaptation") {
		t.Errorf("scratch without adaptation: %v", err)
	}
}

// The budget counts the target and the draft part by part; a context
// whose cache cannot fit is refused with the sizes, one beyond the
// model's training length runs with a warning, and threads beyond the
// machine's are refused with the count.
func TestMemoryBudget(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	o := options(t)
	o.Plan, o.Device = false, DeviceChoice{Kind: DeviceCPU} // every part on the CPU, GPU or not
	r := start(t, m, o)
	b := r.Budget()
	var names []string
	for _, p := range b.Parts {
		names = append(names, p.Name)
		if p.Device != "cpu" || p.Bytes == 0 {
			t.Errorf("part %+v", p)
		}
	}
	if !slices.Equal(names, []string{"weights", "rope table", "kv cache", "scratch", "draft", "trainer", "adaptation"}) {
		t.Errorf("parts %v", names)
	}
	if b.CPU() == 0 || b.GPU() != 0 || b.Available == 0 {
		t.Errorf("budget %+v", b)
	}

	// The longest context, in a little more memory than the weights: the
	// cache is named as what does not fit.
	o.Ctx, o.MemoryLimit = MaxContext, b.part("weights")+1<<20
	_, err := New(m, o)
	var me *MemoryError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "a context of 16777216 positions needs a kv cache of") || !strings.Contains(err.Error(), "--ctx") {
		t.Errorf("a context of 2^24: %v", err)
	}
	o.Ctx, o.MemoryLimit = MaxContext+1, 0
	if _, err := New(m, o); err == nil || !strings.Contains(err.Error(), "out of range [0, 16777216]") {
		t.Errorf("a context past MaxContext: %v", err)
	}
	o.Ctx = 512 // stories260K was trained on 128
	r = start(t, m, o)
	if r.Context() != 512 || !hasNotice(r.Notices(), "beyond the 128 tokens") {
		t.Errorf("context 512: %d, notices %v", r.Context(), r.Notices())
	}
	o.Ctx, o.Threads = 0, runtime.NumCPU()+1
	if _, err := New(m, o); err == nil || !strings.Contains(err.Error(), "logical CPUs") {
		t.Errorf("threads beyond the machine's: %v", err)
	}
}

// Within a memory limit the trainer goes first, then the draft, each with
// a notice; the target itself is refused.
func TestMemoryLimitDegrades(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	o := options(t)
	o.Plan, o.Device = false, DeviceChoice{Kind: DeviceCPU} // the limit is the host's, GPU or not
	full := start(t, m, o).Budget()
	part := func(name string) uint64 {
		for _, p := range full.Parts {
			if p.Name == name {
				return p.Bytes
			}
		}
		t.Fatalf("no part %s in %v", name, full)
		return 0
	}
	target := part("weights") + part("rope table") + part("kv cache") + part("scratch")
	zero := zeroDraft(t, m)
	for _, c := range []struct {
		limit       uint64
		draft, note string
	}{
		{target + part("draft") + 1024, "dgf:" + zero, "adaptation off"},
		{target + 1024, "none", "drafting off"},
	} {
		o := options(t)
		o.Plan, o.Device, o.Draft, o.MemoryLimit = false, DeviceChoice{Kind: DeviceCPU}, DraftChoice{Kind: DraftDGF, Path: zero}, c.limit
		r := start(t, m, o)
		if r.Draft().Name != c.draft || r.Draft().Adapt != adapt.Off || !hasNotice(r.Notices(), c.note) {
			t.Errorf("limit %d: %+v, want %s and %q", c.limit, r.Draft(), c.draft, c.note)
		}
	}
	o.MemoryLimit = target / 2
	var me *MemoryError
	if _, err := New(m, o); !errors.As(err, &me) {
		t.Errorf("the target in half its memory: %v", err)
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// Slots share one packed copy of the weights: four slots take three
// slots' caches and scratch more than one, far less than one more copy of
// the weights.
func TestSlotsShareWeights(t *testing.T) {
	m := open(t, "stories260K-Q8_0-mixed.gguf")
	grow := func(slots int) (uint64, Budget) {
		o := options(t)
		// Every layer on the CPU, GPU or not: the weights measured are the heap's.
		o.Draft, o.Plan, o.Slots, o.Ctx, o.Device = DraftChoice{Kind: DraftNone}, false, slots, 32, DeviceChoice{Kind: DeviceCPU}
		before := heapInUse()
		r, err := New(m, o)
		if err != nil {
			t.Fatal(err)
		}
		for i := range r.Slots() {
			req := engine.Request{Prompt: m.Tok.Encode("Once", true, false), MaxTokens: 4}
			if _, err := r.Slot(i).Generate(context.Background(), req, func(int) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
		after := heapInUse()
		b := r.Budget()
		r.Close()
		return after - before, b
	}
	one, b := grow(1)
	four, _ := grow(4)
	var weights uint64
	for _, p := range b.Parts {
		if p.Name == "weights" {
			weights = p.Bytes
		}
	}
	if extra := four - one; extra > weights {
		t.Errorf("three more slots took %d bytes, the weights are %d", extra, weights)
	}
	t.Logf("one slot %d bytes, four %d; weights %d", one, four, weights)
}

// A calibration measures the target and a draft step, is kept, and makes
// the next runner plan from it; without one the planner learns from the
// run, measuring nothing before the first token.
func TestCalibration(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	o := options(t)
	o.Threads = 1
	r := start(t, m, o)
	if !r.Planner().Provisional() {
		t.Error("an uncalibrated model's planner has a profile")
	}
	var steps []string
	c, err := Calibrate(m, o.Store, 1, false, func(s Step) { steps = append(steps, s.What) })
	if err != nil {
		t.Fatal(err)
	}
	if c.Profile.Decode <= 0 || len(c.Profile.Verify) < 5 || c.DraftStep["cpu"] <= 0 || len(steps) < 3 {
		t.Fatalf("calibration %+v, steps %v", c, steps)
	}
	if got, ok := CachedCalibration(o.Store, m, 1); !ok || got.Profile.Decode != c.Profile.Decode {
		t.Fatalf("not kept: %v", ok)
	}
	if _, ok := CachedCalibration(o.Store, m, 2); ok {
		t.Error("a calibration at 1 thread served for 2")
	}
	if r := start(t, m, o); r.Planner().Provisional() {
		t.Error("a calibrated model's planner learns from scratch")
	}
}
