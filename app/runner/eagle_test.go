package runner

import (
	"context"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"dovetail/app/runner/probe"
	"dovetail/app/runner/pull"
	"dovetail/app/runner/store"
	"dovetail/device"
	"dovetail/engine"
	"dovetail/engine/adapt"
	"dovetail/engine/tree"
	"dovetail/internal/golden"
	"dovetail/internal/registrytest"
	"dovetail/models/draft"
	"dovetail/models/eagle/eagletest"
	"dovetail/train"
)

// writeEagle writes a synthetic EAGLE checkpoint in the published layout
// for m into a directory of the test's and returns it.
func writeEagle(t testing.TB, m *Model, s eagletest.Spec) string {
	t.Helper()
	s.Target = m.Config()
	dir := filepath.Join(t.TempDir(), "eagle-"+s.Kind.String())
	if err := eagletest.Write(dir, s); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Published EAGLE drafts (synthetic weights in the published layouts) draft
// for the target: greedy output equals the target's alone, sampled output
// equals it per seed, every slot drafts, and the info names the kind. An
// EAGLE-3 draft reads three layers the target exports; one with its own
// reduced vocabulary proposes only tokens of it.
func TestEAGLEDrafts(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	o := options(t)
	o.Draft, o.Plan = DraftChoice{Kind: DraftNone}, false
	base := start(t, m, o)
	plain, _ := greedy(t, base, "Lily and Tom", 40)
	sampled := sample(t, base, "Once upon a time", 40, 7)
	base.Close()
	for _, c := range []struct {
		name  string
		spec  eagletest.Spec
		adapt adapt.Mode
		spec0 string // the --draft prefix
	}{
		{"eagle1", eagletest.Spec{Kind: draft.EAGLE1, FCBias: true, Seed: 1}, adapt.Off, "eagle:"},
		{"eagle1-adapting", eagletest.Spec{Kind: draft.EAGLE1, FCBias: true, Seed: 2, DType: "F16"}, adapt.Background, "dgf:"},
		{"eagle3", eagletest.Spec{Kind: draft.EAGLE3, Seed: 3, DType: "BF16", Shards: 2}, adapt.Off, "eagle3:"},
		{"eagle3-reduced", eagletest.Spec{Kind: draft.EAGLE3, Seed: 4, DraftVocab: 200, Embed: true}, adapt.Background, "model:"},
		{"eagle1-pytorch", eagletest.Spec{Kind: draft.EAGLE1, Seed: 5, DType: "F16", PyTorch: true}, adapt.Off, "eagle:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := writeEagle(t, m, c.spec)
			o := options(t)
			o.Draft, o.Plan, o.Slots, o.Greedy, o.Tree = mustDraft(t, c.spec0+dir), false, 2, true, tree.Laptop
			o.Adapt = quickAdapt()
			o.Adapt.Mode = c.adapt
			r := start(t, m, o)
			info := r.Draft()
			if want := c.spec.Kind.String() + ":" + dir; info.Name != want {
				t.Fatalf("drafts with %+v, want %s", info, want)
			}
			for i := range r.Slots() {
				out, st := greedySlot(t, r, i, "Lily and Tom", 40)
				if !slices.Equal(out, plain) {
					t.Fatalf("slot %d: %v, the target alone %v", i, out, plain)
				}
				if st.Rounds == 0 || st.DraftTime == 0 {
					t.Fatalf("slot %d: %d rounds, drafting took %v: the draft did not draft", i, st.Rounds, st.DraftTime)
				}
			}
			if got := sample(t, r, "Once upon a time", 40, 7); !slices.Equal(got, sampled) {
				t.Fatalf("sampled with seed 7: %v, the target alone %v", got, sampled)
			}
		})
	}
}

// An EAGLE draft of another model is refused with one line naming both
// models; a directory that is not one says what it lacks.
func TestEAGLEMismatch(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	other := open(t, "tinystories656K-f32.gguf")
	dir := writeEagle(t, other, eagletest.Spec{Kind: draft.EAGLE3, Seed: 1})
	o := options(t)
	o.Draft = mustDraft(t, "eagle:"+dir)
	_, err := New(m, o)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "hidden") {
		t.Fatalf("an EAGLE draft of another model: %v, want one line naming it and the sizes", err)
	}
	o.Draft = mustDraft(t, "eagle:"+t.TempDir())
	if _, err := New(m, o); err == nil || strings.Contains(err.Error(), "\n") {
		t.Fatalf("an empty directory: %v, want one line", err)
	}
	o.Draft = mustDraft(t, "eagle:"+golden.ModelPath("stories260K-f32.gguf"))
	if _, err := New(m, o); err == nil {
		t.Fatal("a GGUF file was taken for an EAGLE checkpoint")
	}
}

// greedySlot is greedy on slot i.
func greedySlot(t testing.TB, r *Runner, i int, prompt string, n int) ([]int, engine.Stats) {
	t.Helper()
	m := r.Model()
	var out []int
	req := engine.Request{Prompt: m.Tok.Encode(prompt, true, false), MaxTokens: n, Stop: m.Tok.IsEOG}
	st, err := r.Slot(i).Generate(context.Background(), req, func(tok int) error { out = append(out, tok); return nil })
	if err != nil {
		t.Fatal(err)
	}
	return out, st
}

// sample generates n tokens of prompt at temperature 0.8 with seed.
func sample(t testing.TB, r *Runner, prompt string, n int, seed uint64) []int {
	t.Helper()
	m := r.Model()
	var out []int
	req := engine.Request{Prompt: m.Tok.Encode(prompt, true, false), MaxTokens: n, Stop: m.Tok.IsEOG,
		Sampler: engine.SamplerParams{Temperature: 0.8, Seed: seed}}
	if _, err := r.Slot(0).Generate(context.Background(), req, func(tok int) error { out = append(out, tok); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// An EAGLE-1 draft adapts online as a DGF does: versions are published,
// the adapted weights and the text memory are saved at Close, and the
// next runner with the same --draft goes on from the saved version (an
// EAGLE-3 draft keeps its weights and remembers text).
func TestEAGLEAdaptsAndResumes(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	dir := writeEagle(t, m, eagletest.Spec{Kind: draft.EAGLE1, FCBias: true, Seed: 5})
	o := options(t)
	o.Draft, o.Adapt, o.Plan, o.Greedy, o.Tree = mustDraft(t, "eagle:"+dir), quickAdapt(), false, true, tree.Laptop
	r := start(t, m, o)
	if info := r.Draft(); info.Adapt != adapt.Background || info.Trainer == "" {
		t.Fatalf("an EAGLE-1 draft with adaptation on: %+v", info)
	}
	adaptUntilPublished(t, r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	ck, err := draft.Load(o.Store.DraftPath(m.Fingerprint))
	if err != nil {
		t.Fatalf("adapted EAGLE-1 draft not saved: %v", err)
	}
	if ck.Config.Kind != draft.EAGLE1 || ck.Meta[store.MetaStartedAs] != "eagle:"+dir {
		t.Fatalf("saved %v started as %q", ck.Config.Kind, ck.Meta[store.MetaStartedAs])
	}
	saved, _ := strconv.Atoi(ck.Meta[store.MetaVersion])
	r2 := start(t, m, o)
	if v := adaptVersion(t, r2); v != saved || v == 0 {
		t.Fatalf("the next runner drafts with version %d, saved %d", v, saved)
	}

	dir3 := writeEagle(t, m, eagletest.Spec{Kind: draft.EAGLE3, Seed: 6})
	o3 := options(t)
	o3.Draft, o3.Adapt, o3.Plan, o3.Greedy, o3.Tree = mustDraft(t, "eagle:"+dir3), quickAdapt(), false, true, tree.Laptop
	r3 := start(t, m, o3)
	if info := r3.Draft(); info.Adapt != adapt.Off || info.Trainer != "" {
		t.Fatalf("an EAGLE-3 draft: %+v, want no trainer", info)
	}
	for range 3 {
		greedy(t, r3, "Lily and Tom went to the park", 30)
	}
	if mem := r3.draft.adaptive.adapter.Memory(); mem == nil || mem.Len() == 0 {
		t.Fatal("the EAGLE-3 draft's text memory remembered nothing")
	}
}

// pullEagle serves s as the Hugging Face repository repo and pulls it into
// the models folder DOVETAIL_MODELS names; it returns the draft's folder.
func pullEagle(t *testing.T, m *Model, repo string, s eagletest.Spec) string {
	t.Helper()
	reg := registrytest.New(t)
	dir := writeEagle(t, m, s)
	if err := reg.AddRepoDir(repo, dir); err != nil {
		t.Fatal(err)
	}
	got, err := pull.Pull(context.Background(), "hf.co/"+repo, pull.Options{Env: reg.Env})
	if err != nil || got.Draft == nil {
		t.Fatalf("pull %s: %+v, %v", repo, got, err)
	}
	return got.Draft.Dir
}

// --draft auto drafts with the pulled EAGLE draft that fits the model,
// the one whose name shares most with the model's among several, and
// passes over those made for other shapes; without one, the DGF draft.
func TestAutoDraftsWithPulledEAGLE(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	other := open(t, "tinystories656K-f32.gguf")
	t.Setenv("DOVETAIL_MODELS", filepath.Join(t.TempDir(), "models"))
	o := options(t)
	o.Plan, o.Greedy, o.Tree, o.Adapt.Mode = false, true, tree.Laptop, adapt.Off
	if info := start(t, m, o).Draft(); strings.HasPrefix(info.Name, "eagle") {
		t.Fatalf("no pulled draft: auto drafts with %s", info.Name)
	}
	pullEagle(t, other, "org/EAGLE3-stories260K-for-another", eagletest.Spec{Kind: draft.EAGLE3, Seed: 1})
	byName := pullEagle(t, m, "org/EAGLE3-Other-Model", eagletest.Spec{Kind: draft.EAGLE3, Seed: 2})
	want := pullEagle(t, m, "org/EAGLE3-Stories260K", eagletest.Spec{Kind: draft.EAGLE3, Seed: 3})
	r := start(t, m, o)
	if info := r.Draft(); info.Name != "eagle3:"+want {
		t.Fatalf("auto drafts with %q, want the pulled eagle3:%s", info.Name, want)
	}
	named := o
	named.Draft = mustDraft(t, "eagle:hf.co/org/EAGLE3-Other-Model")
	if info := start(t, m, named).Draft(); info.Name != "eagle3:"+byName {
		t.Fatalf("--draft eagle:NAME of a pulled draft drafts with %q, want eagle3:%s", info.Name, byName)
	}
	o.Draft = DraftChoice{Kind: DraftNone}
	plain, _ := greedy(t, start(t, m, o), "Lily and Tom", 30)
	if out, st := greedy(t, r, "Lily and Tom", 30); !slices.Equal(out, plain) || st.Rounds == 0 {
		t.Fatalf("with the pulled draft: %v (%d rounds), the target alone %v", out, st.Rounds, plain)
	}
}

func TestWords(t *testing.T) {
	got := words("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
	for _, w := range []string{"eagle", "3", "llama", "1", "instruct", "8", "b", "yuhuili"} {
		if !got[w] {
			t.Errorf("words lacks %q: %v", w, got)
		}
	}
	if len(got) != 8 {
		t.Errorf("words: %v", got)
	}
}

// setup plans the draft --draft auto will run: with a pulled EAGLE-3 draft
// for the model, that draft's memory and no trainer (it does not train);
// without one, a new DGF draft and its trainer.
func TestFitCountsPulledEAGLE(t *testing.T) {
	t.Setenv("DOVETAIL_MODELS", filepath.Join(t.TempDir(), "models"))
	m := shapeModel(t, "small.gguf", 256, 8, 8, 4, 768, 2000, 1024, nil)
	machine := probe.Report{CPU: probe.CPU{Cores: 2}, Memory: probe.Memory{AvailableBytes: 8 << 30}}
	st := store.At(t.TempDir())
	before := PlanFit(m, machine, nil, st)
	if before.Placement.TrainerDevice != "cpu" {
		t.Fatalf("a new draft: placement %+v", before.Placement)
	}
	pullEagle(t, m, "org/EAGLE3-small", eagletest.Spec{Kind: draft.EAGLE3, DraftVocab: 500})
	f := PlanFit(m, machine, nil, st)
	if f.Placement.TrainerDevice != "none" || f.Placement.DraftDevice != "cpu" {
		t.Fatalf("with a pulled EAGLE-3 draft: placement %+v (%s)", f.Placement, f.Reason)
	}
	if _, dev := partBytes(f.Budget, "trainer"); dev != "" {
		t.Errorf("a trainer is counted on %q", dev)
	}
	_, ec, _ := pulledEAGLE(m)
	fp, err := train.Measure(ec, m.Llama, f.Placement.Ctx, 1, nil, device.NewCounter(false), device.NewCounter(false))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := partBytes(f.Budget, "draft"); got != fp.Draft || got == 0 {
		t.Errorf("the draft counts %d bytes, its footprint %d", got, fp.Draft)
	}
}
