package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"dovetail/app/runner/pull"
	"dovetail/internal/golden"
	"dovetail/internal/registrytest"
)

// userModels gives the test a models folder holding "tiny:1b", pulled
// from a local registry with params, and an ollama store holding
// "other:latest"; it returns the folder and ollama's blob.
func userModels(t *testing.T, params map[string]any) (dir, ollamaBlob string) {
	t.Helper()
	gguf, err := os.ReadFile(golden.ModelPath("stories260K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	dir = filepath.Join(t.TempDir(), "models")
	t.Setenv("DOVETAIL_MODELS", dir)
	reg := registrytest.New(t)
	reg.Add("library/tiny:1b", gguf, params)
	if _, err := pull.Pull(context.Background(), "tiny:1b", pull.Options{Dir: dir, Env: reg.Env}); err != nil {
		t.Fatal(err)
	}
	store := t.TempDir()
	t.Setenv("OLLAMA_MODELS", store)
	sum := sha256.Sum256(gguf)
	digest := hex.EncodeToString(sum[:])
	ollamaBlob = filepath.Join(store, "blobs", "sha256-"+digest)
	manifest, _ := json.Marshal(map[string]any{"layers": []map[string]any{
		{"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:" + digest, "size": len(gguf)}}})
	for path, data := range map[string][]byte{ollamaBlob: gguf,
		filepath.Join(store, "manifests", "registry.ollama.ai", "library", "other", "latest"): manifest} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, ollamaBlob
}

// list shows the pulled model first, then the embedded one and ollama's,
// with parameters, quantization, size and where each comes from; --json
// says the same.
func TestList(t *testing.T) {
	userModels(t, nil)
	out, errOut, code := runCLI(t, "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME") || !strings.HasPrefix(lines[1], "tiny:1b ") {
		t.Fatalf("list:\n%s", out)
	}
	for i, want := range [][]string{{"tiny:1b", "F32", "pulled"}, {"tinystories656K-Q8_0.gguf", "Q8_0", "embedded"}, {"other:latest", "F32", "ollama"}} {
		for _, w := range want {
			if !strings.Contains(lines[i+1], w) {
				t.Errorf("row %q lacks %q", lines[i+1], w)
			}
		}
	}
	out, _, code = runCLI(t, "list", "--json")
	var ms []listed
	if err := json.Unmarshal([]byte(out), &ms); err != nil || code != 0 || len(ms) != 3 {
		t.Fatalf("list --json: %v, exit %d:\n%s", err, code, out)
	}
	if m := ms[0]; m.Name != "tiny:1b" || m.Source != "pulled" || m.Parameters == 0 || m.ParameterSize == "" || m.Quantization != "F32" || m.Size == 0 {
		t.Errorf("pulled model: %+v", m)
	}
}

// rm deletes a pulled model, by name or by its file; it refuses, in one
// line and deleting nothing, ollama's model, the embedded one, and files
// Dovetail did not download, outside the models folder or in it.
func TestRm(t *testing.T) {
	dir, blob := userModels(t, nil)
	stray := filepath.Join(dir, "notes.gguf")
	if err := os.WriteFile(stray, []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"rm", "other"}, 1, "ollama's model"},
		{[]string{"rm", blob}, 1, "did not download"},
		{[]string{"rm", golden.ModelPath("stories260K-f32.gguf")}, 1, "did not download"},
		{[]string{"rm", stray}, 1, "did not download"},
		{[]string{"rm", "tinystories656K-Q8_0"}, 1, "embedded model"},
		{[]string{"rm", "nothing:here"}, 1, "no pulled model"},
		{[]string{"rm", "tiny:1b", "other"}, 1, "ollama's model"}, // one refused deletes none
		{[]string{"rm"}, 2, "rm"},
	} {
		_, errOut, code := runCLI(t, c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%q: exit %d, %q", c.args, code, errOut)
		}
	}
	for _, f := range []string{blob, golden.ModelPath("stories260K-f32.gguf"), stray} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if ms, _ := pull.List(dir); len(ms) != 1 {
		t.Fatalf("pulled after the refusals: %+v", ms)
	}
	ms, _ := pull.List(dir)
	out, errOut, code := runCLI(t, "rm", ms[0].Path)
	if code != 0 || !strings.Contains(out, "deleted 'tiny:1b'") {
		t.Errorf("rm by its file: exit %d, %q %q", code, out, errOut)
	}
	if ms, _ := pull.List(dir); len(ms) != 0 {
		t.Errorf("pulled after rm: %+v", ms)
	}
	if _, _, code := runCLI(t, "rm", "tiny:1b"); code != 1 {
		t.Errorf("rm again: exit %d", code)
	}
}

// run -m takes a pulled model's name, and its params are defaults under
// the flags: num_predict 3 from the manifest, -n 5 over it.
func TestRunPulledName(t *testing.T) {
	userModels(t, map[string]any{"num_predict": 3})
	r := runJSON(t, "-m", "tiny:1b", "-p", "Once upon a time", "--temp", "0", "--draft", "none")
	if len(r.Tokens) != 3 || r.Model != "tiny:1b" {
		t.Errorf("with the model's num_predict: %d tokens, model %q", len(r.Tokens), r.Model)
	}
	r = runJSON(t, "-m", "TINY:1b", "-p", "Once upon a time", "--temp", "0", "--draft", "none", "-n", "5")
	if len(r.Tokens) != 5 {
		t.Errorf("with -n 5: %d tokens", len(r.Tokens))
	}
	if out, errOut, code := runCLI(t, "show", "tiny:1b"); code != 0 || !strings.Contains(out, "architecture") {
		t.Errorf("show tiny:1b: exit %d, %s%s", code, out, errOut)
	}
	_, errOut, code := runCLI(t, "run", "-m", "nothing:here", "-p", "x")
	if code != 1 || !strings.Contains(errOut, "nothing:here") {
		t.Errorf("an unknown name: exit %d, %q", code, errOut)
	}
}

// chat takes a pulled model's name, whose params are defaults until /set
// sets one.
func TestChatPulledParams(t *testing.T) {
	userModels(t, map[string]any{"num_predict": 2})
	out, err := chatPiped(t, []string{"Once upon a time", "/set parameter num_predict 4", "Once upon a time"}, "tiny:1b")
	if err != nil || !strings.Contains(out, "[2 tokens,") || !strings.Contains(out, "[4 tokens,") {
		t.Errorf("%v:\n%s", err, out)
	}
}
