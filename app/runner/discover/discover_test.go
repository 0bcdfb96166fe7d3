package discover

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
