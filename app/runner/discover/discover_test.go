package discover

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"dovetail/models/draft"
	"dovetail/models/gguf"
)

// put writes a file, making its folders; a model file starts with GGUF.
func put(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func manifestOf(model, template string) string {
	return `{"schemaVersion":2,"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:` + model +
		`","size":8},{"mediaType":"application/vnd.ollama.image.template","digest":"sha256:` + template + `","size":5}]}`
}

// An ollama store as `ollama pull` leaves it: manifests naming blobs, the
// library's models by their short names, others with their namespace and
// host; a manifest whose blob is gone is skipped.
func TestOllama(t *testing.T) {
	store := t.TempDir()
	put(t, filepath.Join(store, "blobs", "sha256-aaaa"), "GGUF....")
	put(t, filepath.Join(store, "blobs", "sha256-bbbb"), "GGUF....")
	put(t, filepath.Join(store, "blobs", "sha256-cccc"), "GGUF....")
	put(t, filepath.Join(store, "blobs", "sha256-tttt"), "{{ .Prompt }}")
	m := filepath.Join(store, "manifests")
	put(t, filepath.Join(m, "registry.ollama.ai", "library", "llama3", "8b"), manifestOf("aaaa", "tttt"))
	put(t, filepath.Join(m, "registry.ollama.ai", "jmorgan", "tiny", "latest"), manifestOf("bbbb", "tttt"))
	put(t, filepath.Join(m, "hf.co", "bartowski", "Qwen2-GGUF", "Q4_K_M"), manifestOf("cccc", "tttt"))
	put(t, filepath.Join(m, "registry.ollama.ai", "library", "gone", "latest"), manifestOf("dddd", "tttt"))
	put(t, filepath.Join(m, "registry.ollama.ai", "library", "broken", "latest"), "{not json")
	got, err := Find(Places{Ollama: []string{store, filepath.Join(store, "nothing-here")}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"llama3:8b": "sha256-aaaa", "jmorgan/tiny:latest": "sha256-bbbb", "hf.co/bartowski/Qwen2-GGUF:Q4_K_M": "sha256-cccc"}
	if len(got) != len(want) {
		t.Fatalf("found %+v", got)
	}
	for _, g := range got {
		if blob, ok := want[g.Name]; !ok || filepath.Base(g.Path) != blob || g.Source != "ollama" || g.Size != 8 {
			t.Errorf("found %+v", g)
		}
	}
}

// LM Studio's folders: PUBLISHER/REPO/FILE.gguf by that name; vision
// projectors and a split model's later parts are not models of their own.
func TestLMStudio(t *testing.T) {
	dir := t.TempDir()
	repo := filepath.Join(dir, "lmstudio-community", "Meta-Llama-3-8B-Instruct-GGUF")
	put(t, filepath.Join(repo, "Meta-Llama-3-8B-Instruct-Q4_K_M.gguf"), "GGUF")
	put(t, filepath.Join(repo, "mmproj-model-f16.gguf"), "GGUF")
	put(t, filepath.Join(dir, "big", "repo", "model-00001-of-00002.gguf"), "GGUF")
	put(t, filepath.Join(dir, "big", "repo", "model-00002-of-00002.gguf"), "GGUF")
	put(t, filepath.Join(dir, "big", "repo", "README.md"), "hello")
	got, err := Find(Places{LMStudio: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range got {
		names = append(names, g.Name)
		if g.Source != "lmstudio" {
			t.Errorf("%+v", g)
		}
	}
	if strings.Join(names, ",") != "big/repo/model-00001-of-00002.gguf,lmstudio-community/Meta-Llama-3-8B-Instruct-GGUF/Meta-Llama-3-8B-Instruct-Q4_K_M.gguf" {
		t.Errorf("found %v", names)
	}
}

// Paths the user names: a GGUF file, a folder of them; a file that is no
// GGUF and a path that is not there are errors. A file found twice is
// listed once.
func TestPaths(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.gguf")
	put(t, a, "GGUF")
	put(t, filepath.Join(dir, "sub", "b.gguf"), "GGUF")
	put(t, filepath.Join(dir, "notes.txt"), "x")
	got, err := Find(Places{Paths: []string{a, dir}})
	if err != nil || len(got) != 2 || got[0].Name != "a.gguf" || got[1].Name != "sub/b.gguf" {
		t.Fatalf("found %+v, %v", got, err)
	}
	if _, err := Find(Places{Paths: []string{filepath.Join(dir, "notes.txt")}}); err == nil || !strings.Contains(err.Error(), "not a GGUF") {
		t.Errorf("a text file: %v", err)
	}
	if _, err := Find(Places{Paths: []string{filepath.Join(dir, "none.gguf")}}); err == nil {
		t.Error("a missing path found")
	}
}

// The user's places: OLLAMA_MODELS first, then the usual homes.
func TestUserPlaces(t *testing.T) {
	t.Setenv("OLLAMA_MODELS", "/srv/ollama")
	p := UserPlaces("/home/u")
	if p.Ollama[0] != "/srv/ollama" || p.Ollama[1] != "/home/u/.ollama/models" || p.LMStudio[0] != "/home/u/.lmstudio/models" {
		t.Errorf("%+v", p)
	}
}

// writeGGUF writes a GGUF file with the metadata kv (key, value pairs).
func writeGGUF(t *testing.T, path string, kv ...string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter()
	for i := 0; i+1 < len(kv); i += 2 {
		w.Set(kv[i], kv[i+1])
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

// Drafts, adapters and projectors beside the models are not models: a
// folder leaves them out, and one named on its own is an error saying
// what it is.
func TestNotModels(t *testing.T) {
	dir := t.TempDir()
	writeGGUF(t, filepath.Join(dir, "llama.gguf"), "general.architecture", "llama")
	writeGGUF(t, filepath.Join(dir, "drafts", "0123abcd.gguf"), "general.architecture", draft.Arch)
	writeGGUF(t, filepath.Join(dir, "lora.gguf"), "general.architecture", "llama", "general.type", "adapter")
	writeGGUF(t, filepath.Join(dir, "proj.gguf"), "general.architecture", "clip")
	for _, p := range []Places{{Paths: []string{dir}}, {LMStudio: []string{dir}}} {
		got, err := Find(p)
		if err != nil || len(got) != 1 || got[0].Name != "llama.gguf" {
			t.Errorf("%+v: found %+v, %v", p, got, err)
		}
	}
	_, err := Find(Places{Paths: []string{filepath.Join(dir, "drafts", "0123abcd.gguf")}})
	if err == nil || !strings.Contains(err.Error(), "draft") || !strings.Contains(err.Error(), "not a model") {
		t.Errorf("a draft named as a model: %v", err)
	}
}

// Names as ollama resolves them: no tag means :latest, the library's host
// and namespace may be spelt out, case does not matter, and a file is its
// base name with or without .gguf; a host's port is no tag.
func TestCanonical(t *testing.T) {
	for _, same := range [][]string{
		{"s110", "s110:latest", "S110:Latest", "s110.gguf", "s110.gguf:latest", "library/s110", "registry.ollama.ai/library/s110:latest"},
		{"llama3:8b", "library/llama3:8b", "registry.ollama.ai/library/llama3:8b", "LLAMA3:8B"},
		{"jmorgan/tiny", "jmorgan/tiny:latest", "registry.ollama.ai/jmorgan/tiny"},
		{"host:5000/ns/m", "host:5000/ns/m:latest"},
	} {
		for _, n := range same[1:] {
			if Canonical(n) != Canonical(same[0]) {
				t.Errorf("%q is %q, %q is %q", n, Canonical(n), same[0], Canonical(same[0]))
			}
		}
	}
	for _, other := range [][2]string{{"s110", "s110:q8"}, {"llama3:8b", "llama3"}, {"jmorgan/tiny", "tiny"}, {"a/b.gguf", "b"}} {
		if Canonical(other[0]) == Canonical(other[1]) {
			t.Errorf("%q and %q both %q", other[0], other[1], Canonical(other[0]))
		}
	}
	for name, want := range map[string]string{"s110.gguf": "s110:latest", "sub/b.gguf": "sub/b:latest", "llama3:8b": "llama3:8b",
		"hf.co/bartowski/Qwen2-GGUF:Q4_K_M": "hf.co/bartowski/Qwen2-GGUF:Q4_K_M"} {
		if got := (Model{Name: name}).Tagged(); got != want {
			t.Errorf("%q tagged %q, want %q", name, got, want)
		}
	}
}
