package pull

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"dovetail/models"
	"dovetail/models/draft"
	"dovetail/models/eagle"
	"dovetail/models/eagle/eagletest"
	"dovetail/models/safetensors"
)

// draftTarget is a target small enough to write drafts for.
func draftTarget() models.Config {
	return models.Config{Arch: "llama", Hidden: 32, Layers: 8, Heads: 4, KVHeads: 2, HeadDim: 8,
		FFN: 48, Vocab: 100, ContextLength: 256, RMSEps: 1e-5, RopeTheta: 10000}
}

// addDraftRepo publishes an EAGLE checkpoint as a Hugging Face repository
// does: the JSON files in git, the safetensors in LFS. It returns the
// files' bytes by name.
func (h *fakeHub) addDraftRepo(repo string, s eagletest.Spec) map[string][]byte {
	h.t.Helper()
	if s.Target.Hidden == 0 {
		s.Target = draftTarget()
	}
	dir := filepath.Join(h.t.TempDir(), "draft")
	if err := eagletest.Write(dir, s); err != nil {
		h.t.Fatal(err)
	}
	ents, _ := os.ReadDir(dir)
	files := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			h.t.Fatal(err)
		}
		files[e.Name()] = b
		h.addRepoFile(repo+"/"+e.Name(), b)
	}
	return files
}

// addRepoFile publishes a file: JSON in git, anything else in LFS.
func (h *fakeHub) addRepoFile(path string, b []byte) string {
	if strings.HasSuffix(path, ".json") {
		h.mu.Lock()
		h.gitFiles[path] = b
		h.mu.Unlock()
		return gitBlobID(b)
	}
	return h.addFile(path, b)
}

// sameFiles fails unless dir holds exactly want's files (and the marker).
func sameFiles(t *testing.T, dir string, want map[string][]byte) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(want)+1 {
		t.Errorf("%s holds %d files, want %d and the marker", dir, len(ents), len(want))
	}
	for name, b := range want {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !reflect.DeepEqual(got, b) {
			t.Errorf("%s: not the repository's (%v)", name, err)
		}
	}
}

// A whole pull: config.json, then model.safetensors, verified, into
// drafts/hf.co/ORG/REPO, listed with its kind and size; nothing left in
// blobs/; pulling again downloads no weights again.
func TestPullDraft(t *testing.T) {
	h := newHub(t)
	files := h.addDraftRepo("org/EAGLE3-Tiny", eagletest.Spec{Kind: draft.EAGLE3, DraftVocab: 60, DType: "BF16"})
	dir := t.TempDir()
	o, seen := h.opts(dir, nil)
	m, err := Pull(pullCtx(t), "https://huggingface.co/org/EAGLE3-Tiny", o)
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	for _, b := range files {
		size += int64(len(b))
	}
	want := Draft{Name: "hf.co/org/EAGLE3-Tiny", Dir: filepath.Join(dir, "drafts", "hf.co", "org", "EAGLE3-Tiny"), Size: size, Kind: "eagle3"}
	if m.Draft == nil || *m.Draft != want || m.Name != want.Name || m.Path != want.Dir || m.Size != size {
		t.Fatalf("pulled %+v (draft %+v), want %+v", m, m.Draft, want)
	}
	sameFiles(t, want.Dir, files)
	if c, err := eagle.ReadConfig(want.Dir); err != nil || c.Kind != draft.EAGLE3 || c.DraftVocab != 60 {
		t.Errorf("the pulled folder reads as %+v, %v", c, err)
	}
	if ds, err := Drafts(dir); err != nil || len(ds) != 1 || ds[0] != want {
		t.Errorf("Drafts = %+v, %v", ds, err)
	}
	if ms, _ := List(dir); len(ms) != 0 {
		t.Errorf("a draft is listed as a model: %+v", ms)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "blobs")); len(ents) != 0 {
		t.Errorf("blobs left: %v", ents)
	}
	if p := *seen; p[len(p)-1].Status != "success" {
		t.Errorf("last step %+v", p[len(p)-1])
	}
	before := len(h.seenRanges())
	if _, err := Pull(pullCtx(t), "hf.co/org/EAGLE3-Tiny", o); err != nil {
		t.Fatal(err)
	}
	if n := len(h.seenRanges()); n != before {
		t.Errorf("a second pull downloaded %d files again", n-before)
	}
	sameFiles(t, want.Dir, files)
}

// Shards: the index (HEAD 404 on model.safetensors) and each shard it
// names. A pull stopped halfway through a shard lists no draft and keeps
// the part; the next resumes it with a Range request.
func TestPullDraftShardsResume(t *testing.T) {
	h := newHub(t)
	files := h.addDraftRepo("org/eagle-tiny", eagletest.Spec{Kind: draft.EAGLE1, FCBias: true, Shards: 2, VLLM: true})
	shard := files["model-00002-of-00002.safetensors"]
	if shard == nil {
		t.Fatalf("no second shard: %v", files)
	}
	half := int64(len(shard) / 2)
	h.stallAt[digestOf(shard)] = half
	dir := t.TempDir()
	o, _ := h.opts(dir, nil)
	ctx, cancel := context.WithCancel(pullCtx(t))
	o.Progress = func(p Progress) {
		if p.Digest == digestOf(shard) && p.Completed >= half {
			cancel()
		}
	}
	_, err := Pull(ctx, "hf.co/org/eagle-tiny", o)
	var intr *Interrupted
	if !errors.As(err, &intr) || intr.Have != half {
		t.Fatalf("err = %v, want *Interrupted at %d", err, half)
	}
	if ds, _ := Drafts(dir); len(ds) != 0 {
		t.Errorf("an interrupted pull is listed: %+v", ds)
	}
	if _, err := os.Stat(filepath.Join(dir, "drafts", "hf.co", "org", "eagle-tiny")); err == nil {
		t.Error("an interrupted pull left the draft's folder")
	}
	o, _ = h.opts(dir, nil)
	m, err := Pull(pullCtx(t), "hf.co/org/eagle-tiny", o)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.seenRanges(); got[len(got)-1] != "bytes="+strconv.FormatInt(half, 10)+"-" {
		t.Errorf("Range headers = %q", got)
	}
	if m.Draft == nil || m.Draft.Kind != "eagle" {
		t.Fatalf("pulled %+v", m)
	}
	sameFiles(t, m.Path, files)
	noPartials(t, dir)
}

// A shard whose bytes are not its SHA-256 is refused: no draft, no
// partial file, no folder.
func TestPullDraftCorruptShard(t *testing.T) {
	h := newHub(t)
	files := h.addDraftRepo("org/eagle3-bad", eagletest.Spec{Kind: draft.EAGLE3, Shards: 2})
	shard := files["model-00001-of-00002.safetensors"]
	bad := append([]byte(nil), shard...)
	bad[len(bad)-3] ^= 1
	h.bodyOverride[digestOf(shard)] = bad
	dir := t.TempDir()
	o, _ := h.opts(dir, nil)
	_, err := Pull(pullCtx(t), "hf.co/org/eagle3-bad", o)
	var de *DigestError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "hf.co/org/eagle3-bad: the download's SHA-256") {
		t.Fatalf("err = %v", err)
	}
	if ds, _ := Drafts(dir); len(ds) != 0 {
		t.Errorf("listed: %+v", ds)
	}
	noPartials(t, dir)
	if ents, _ := os.ReadDir(filepath.Join(dir, "drafts", "hf.co", "org")); len(ents) != 0 {
		t.Errorf("left in drafts/: %v", ents)
	}
}

// A config.json that is not what its git blob id says is refused before
// anything else is fetched.
func TestPullDraftCorruptConfig(t *testing.T) {
	h := newHub(t)
	h.addDraftRepo("org/eagle3", eagletest.Spec{Kind: draft.EAGLE3})
	h.etag["org/eagle3/config.json"] = gitBlobID([]byte("{}"))
	dir := t.TempDir()
	o, _ := h.opts(dir, nil)
	_, err := Pull(pullCtx(t), "hf.co/org/eagle3", o)
	if err == nil || !strings.Contains(err.Error(), "hf.co/org/eagle3: config.json as downloaded is not what Hugging Face says it is (git blob 9e26dfeeb6e641a33dae4961196235bdb965b21b") {
		t.Fatalf("err = %v", err)
	}
	if ds, _ := Drafts(dir); len(ds) != 0 || len(h.seenRanges()) != 0 {
		t.Errorf("listed %+v; %d downloads", ds, len(h.seenRanges()))
	}
}

// A repository whose config.json is another model's, with no GGUF file
// named: one line saying it is neither, still ErrNotFound; one without
// config.json answers as a GGUF pull does today.
func TestPullNotADraft(t *testing.T) {
	h := newHub(t)
	h.addRepoFile("meta/Llama-8B/config.json", []byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":4096,
		"intermediate_size":14336,"num_attention_heads":32,"num_hidden_layers":32,"vocab_size":128256,"rms_norm_eps":1e-5}`))
	h.addFile("meta/Llama-8B/model.safetensors", []byte("weights"))
	dir := t.TempDir()
	o, _ := h.opts(dir, nil)
	_, err := Pull(pullCtx(t), "hf.co/meta/Llama-8B", o)
	if err == nil || !errors.Is(err, ErrNotFound) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %v", err)
	}
	for _, want := range []string{"hf.co/meta/Llama-8B is neither a GGUF repository nor an EAGLE draft",
		"its config.json describes LlamaForCausalLM", "hf.co/ORG/REPO/FILE.gguf", "not found (404)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	if len(h.seenRanges()) != 0 {
		t.Error("a plain model's weights were downloaded")
	}
	_, err = Pull(pullCtx(t), "hf.co/org/none", o)
	if err == nil || !errors.Is(err, ErrNotFound) || strings.Contains(err.Error(), "EAGLE") ||
		!strings.HasPrefix(err.Error(), "hf.co/org/none:latest: not found (404)") {
		t.Fatalf("no config.json: err = %v", err)
	}
	// An EAGLE-3 config whose weights do not read as a draft (no fc) is
	// refused after the download, and nothing is kept.
	h.addRepoFile("org/fake/config.json", []byte(`{"architectures":["LlamaForCausalLMEagle3"],"hidden_size":32,
		"intermediate_size":48,"num_attention_heads":4,"num_hidden_layers":1,"vocab_size":100,"rms_norm_eps":1e-5}`))
	h.addFile("org/fake/model.safetensors", h.addDraftRepo("org/other", eagletest.Spec{Kind: draft.EAGLE3, Edit: dropFC})["model.safetensors"])
	_, err = Pull(pullCtx(t), "hf.co/org/fake", o)
	if err == nil || !strings.Contains(err.Error(), "hf.co/org/fake: not an EAGLE draft Dovetail reads") || !strings.Contains(err.Error(), "no fc.weight") {
		t.Fatalf("err = %v", err)
	}
	if ds, _ := Drafts(dir); len(ds) != 0 {
		t.Errorf("listed: %+v", ds)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, "blobs")); len(ents) != 0 {
		t.Errorf("blobs left: %v", ents)
	}
}

// A draft published as PyTorch's pytorch_model.bin (EAGLE's own
// releases), one file or shards with their index, pulls as a safetensors
// one does and loads; a .bin that is not a PyTorch checkpoint is refused
// before it is placed, in one line.
func TestPullDraftPyTorch(t *testing.T) {
	h := newHub(t)
	files := h.addDraftRepo("yuhuili/EAGLE3-Tiny", eagletest.Spec{Kind: draft.EAGLE3, PyTorch: true, Shards: 2, DType: "F16"})
	if _, ok := files["pytorch_model.bin.index.json"]; !ok {
		t.Fatalf("the repository has %v", files)
	}
	h.addDraftRepo("yuhuili/EAGLE-Tiny", eagletest.Spec{Kind: draft.EAGLE1, PyTorch: true, FCBias: true})
	dir := t.TempDir()
	o, _ := h.opts(dir, nil)
	for _, name := range []string{"yuhuili/EAGLE3-Tiny", "yuhuili/EAGLE-Tiny"} {
		m, err := Pull(pullCtx(t), "hf.co/"+name, o)
		if err != nil || m.Draft == nil {
			t.Fatalf("%s: %+v, %v", name, m, err)
		}
		if _, err := eagle.Load(m.Draft.Dir, draftTarget()); err != nil {
			t.Fatalf("%s: the pulled draft does not load: %v", name, err)
		}
	}
	sameFiles(t, filepath.Join(dir, "drafts", "hf.co", "yuhuili", "EAGLE3-Tiny"), files)

	bad := h.addDraftRepo("org/Broken", eagletest.Spec{Kind: draft.EAGLE3})
	h.mu.Lock()
	delete(h.files, "org/Broken/model.safetensors")
	h.mu.Unlock()
	h.addFile("org/Broken/pytorch_model.bin", bad["model.safetensors"])
	_, err := Pull(pullCtx(t), "hf.co/org/Broken", o)
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "not a PyTorch zip checkpoint") {
		t.Fatalf("a .bin that is not PyTorch's: %v", err)
	}
	if ds, _ := Drafts(dir); len(ds) != 2 {
		t.Errorf("Drafts = %+v, want the two whole ones", ds)
	}
}

// Drafts lists only whole drafts: not a folder without its marker, nor
// one whose file is short, nor a pull's hidden staging folder.
func TestDraftsOnlyWhole(t *testing.T) {
	h := newHub(t)
	h.addDraftRepo("org/a", eagletest.Spec{Kind: draft.EAGLE3})
	h.addDraftRepo("org/b", eagletest.Spec{Kind: draft.EAGLE1})
	dir := t.TempDir()
	o, _ := h.opts(dir, nil)
	for _, n := range []string{"hf.co/org/a", "hf.co/org/b"} {
		if _, err := Pull(pullCtx(t), n, o); err != nil {
			t.Fatal(err)
		}
	}
	root := filepath.Join(dir, "drafts", "hf.co", "org")
	// a's weights cut short; b's copied to c without the marker, and to a
	// staging folder.
	w := filepath.Join(root, "a", "model.safetensors")
	st, _ := os.Stat(w)
	os.Truncate(w, st.Size()-1)
	for _, to := range []string{"c", ".d.pulling"} {
		os.MkdirAll(filepath.Join(root, to), 0o755)
		for _, f := range []string{"config.json", "model.safetensors", draftMarker} {
			b, _ := os.ReadFile(filepath.Join(root, "b", f))
			if f == draftMarker && to == "c" {
				continue
			}
			os.WriteFile(filepath.Join(root, to, f), b, 0o644)
		}
	}
	ds, err := Drafts(dir)
	if err != nil || len(ds) != 1 || ds[0].Name != "hf.co/org/b" || ds[0].Kind != "eagle" {
		t.Fatalf("Drafts = %+v, %v", ds, err)
	}
	if _, ok, _ := FindDraft(dir, "hf.co/org/a"); ok {
		t.Error("a draft cut short is found")
	}
	if d, ok, err := FindDraft(dir, "huggingface.co/ORG/B"); !ok || err != nil || d.Name != "hf.co/org/b" {
		t.Errorf("FindDraft by another spelling: %+v %v %v", d, ok, err)
	}
	if ds, err := Drafts(t.TempDir()); err != nil || len(ds) != 0 {
		t.Errorf("a folder that is not Dovetail's: %+v, %v", ds, err)
	}
}

// Remove deletes a pulled draft by any spelling of its name, and its
// organisation's folder once empty; a second time it is not found.
func TestRemoveDraft(t *testing.T) {
	h := newHub(t)
	h.addDraftRepo("org/eagle3", eagletest.Spec{Kind: draft.EAGLE3})
	dir := t.TempDir()
	o, _ := h.opts(dir, nil)
	m, err := Pull(pullCtx(t), "hf.co/org/eagle3", o)
	if err != nil {
		t.Fatal(err)
	}
	if err := Remove(dir, "https://huggingface.co/Org/EAGLE3"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(m.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s is still there: %v", m.Path, err)
	}
	if _, err := os.Stat(filepath.Dir(m.Path)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the organisation's empty folder is left: %v", err)
	}
	if err := Remove(dir, "hf.co/org/eagle3"); !errors.Is(err, ErrNotFound) {
		t.Errorf("removed twice: %v", err)
	}
}

// dropFC takes EAGLE's fc tensor out: weights that are not a draft's.
func dropFC(ts []*safetensors.Tensor) []*safetensors.Tensor {
	var out []*safetensors.Tensor
	for _, t := range ts {
		if !strings.HasSuffix(t.Name, "fc.weight") {
			out = append(out, t)
		}
	}
	return out
}
