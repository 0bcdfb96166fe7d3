package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// chatPiped runs chat with lines on standard input; out is what it
// wrote, both streams.
func chatPiped(t *testing.T, lines []string, args ...string) (string, error) {
	t.Helper()
	c := command(append([]string{"chat", "--temp", "0", "--draft", "none"}, args...)...)
	c.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	b, err := c.CombinedOutput()
	return string(b), err
}

// /set parameter: a bad name or value is one line naming it, and changes
// nothing; a good one is what /show parameters shows.
func TestChatSetParameter(t *testing.T) {
	out, err := chatPiped(t, []string{
		"/set parameter temperature abc",
		"/set parameter temperature -1",
		"/set parameter tempreature 0.5",
		"/set parameter top_k 1.5",
		"/set parameter num_predict 0",
		"/set parameter seed",
		"/set parameter top_p 0.5",
		"/set parameter num_predict 3",
		"/show parameters",
		"Once upon a time",
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"\ntemperature: \"abc\" is not a number\n",
		"\ntemperature: -1 out of range [0, 100]\n",
		"\nunknown parameter \"tempreature\" (the parameters: temperature, top_k, top_p, min_p, repeat_penalty, seed, num_predict, num_ctx)\n",
		"\ntop_k: \"1.5\" is not a whole number\n",
		"\nnum_predict: 0 must be -1 (until the context ends) or at least 1\n",
		"\nusage: /set parameter NAME VALUE",
		"\nset parameter top_p to 0.5\n",
		"  temperature     0    ",
		"  top_p           0.5  ",
		"  num_predict     3    ",
		"[3 tokens,",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// /show info, template and system say what the chat runs; /set system
// sets the system prompt; /set nowordwrap and /? answer.
func TestChatShow(t *testing.T) {
	out, err := chatPiped(t, []string{"/show info", "/show template", "/set system be brief", "/show system",
		"/set nowordwrap", "/?", "/show nothing"})
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{`architecture +llama\n`, `context length +512 \(running 512\)\n`, `quantization +Q8_0\n`,
		`draft +none\n`, "messages are formatted as raw", `system prompt: "be brief"`, "set nowordwrap", "/load MODEL",
		"usage: /show info"} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
}

// /save never writes over a file (the model it was started with
// included); /save! does; both write the whole file or none.
func TestChatSaveRefusesExisting(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model.gguf")
	orig, err := os.ReadFile("../../testdata/models/tinystories656K/tinystories656K-Q8_0.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(model, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	conv := filepath.Join(dir, "conv.json")
	os.WriteFile(conv, []byte("old"), 0o600)
	out, err := chatPiped(t, []string{"Once upon a time", "/save " + model, "/save " + conv, "/save! " + conv, "/save", "/save " + dir,
		"/save " + filepath.Join(dir, "none", "c.json")}, "-m", model)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"not saved: " + model + " exists (/save! " + model + " replaces it)\n",
		"not saved: " + conv + " exists",
		"saved the conversation to " + conv + "\n",
		"usage: /save FILE, or /save! FILE to replace one\n",
		"not saved: " + dir + " is a folder\n",
		"not saved: " + filepath.Join(dir, "none", "c.json") + ": no such file or directory\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if b, _ := os.ReadFile(model); string(b) != string(orig) {
		t.Errorf("/save wrote over the model: %d bytes, was %d", len(b), len(orig))
	}
	if c := readConversation(t, conv); len(c.Messages) != 2 {
		t.Errorf("/save! wrote %+v", c.Messages)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Errorf("%d files in the folder, want 2 (no temporary file left)", len(ents))
	}
}

// chat NAME: a model by its name in the user's ollama store, in a
// --models folder, the embedded one, or by its path; a name nothing
// answers to is one line and a non-zero exit.
func TestChatByName(t *testing.T) {
	store := t.TempDir()
	ollamaStore(t, store, "tiny", "latest", "../../testdata/models/stories260K/stories260K-Q8_0-mixed.gguf")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tiny"}, "chatting with tiny:latest"},
		{[]string{"tiny:latest"}, "chatting with tiny:latest"},
		{[]string{"--models", "../../testdata/models/tinystories656K", "tinystories656K-Q4_0"}, "chatting with tinystories656K-Q4_0.gguf"},
		{[]string{"tinystories656K-Q8_0"}, "chatting with tinystories656K-Q8_0.gguf (draft none)"},
		{[]string{"../../testdata/models/stories260K/stories260K-F16.gguf"}, "chatting with stories260K-F16.gguf"},
	} {
		c0 := command(append([]string{"chat", "--draft", "none"}, c.args...)...)
		c0.Env = append(c0.Env, "OLLAMA_MODELS="+store)
		c0.Stdin = strings.NewReader("/bye\n")
		out, err := c0.CombinedOutput()
		if err != nil || !strings.Contains(string(out), c.want) {
			t.Errorf("chat %v: %v\n%s", c.args, err, out)
		}
	}
	for _, bad := range [][]string{{"no-such-model"}, {"-m", "tiny", "tiny"}, {"../../testdata"}} {
		c0 := command(append([]string{"chat"}, bad...)...)
		c0.Env = append(c0.Env, "OLLAMA_MODELS="+store)
		out, err := c0.CombinedOutput()
		if err == nil || strings.Count(strings.TrimSpace(string(out)), "\n") > 0 || !strings.Contains(string(out), bad[len(bad)-1]) {
			t.Errorf("chat %v: %v\n%s", bad, err, out)
		}
	}
}

// /load switches the model by name or path, starting the conversation
// anew and keeping the settings; a model it cannot load leaves the one
// running.
func TestChatLoad(t *testing.T) {
	saved := filepath.Join(t.TempDir(), "conv.json")
	out, err := chatPiped(t, []string{"/set parameter top_k 7", "Once upon a time",
		"/load ../../testdata/models/stories260K/stories260K-Q8_0-mixed.gguf", "/load no-such-model",
		"/load ../../testdata/models/README.md", "/show parameters", "/save " + saved, "/set parameter num_ctx 128", "/show info"})
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"loaded stories260K-Q8_0-mixed.gguf", `not loaded: no model "no-such-model"`,
		"not loaded: .*README.md", `top_k +7 `, "set parameter num_ctx to 128", `\(running 128\)`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if c := readConversation(t, saved); c.Model != "stories260K-Q8_0-mixed.gguf" || len(c.Messages) != 0 {
		t.Errorf("after /load: %+v", c)
	}
}

// ollamaStore makes an ollama model store holding the GGUF file src as
// name:tag.
func ollamaStore(t *testing.T, store, name, tag, src string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	const hex = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	os.MkdirAll(filepath.Join(store, "blobs"), 0o755)
	if err := os.WriteFile(filepath.Join(store, "blobs", "sha256-"+hex), b, 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(store, "manifests", "registry.ollama.ai", "library", name)
	os.MkdirAll(dir, 0o755)
	manifest := `{"layers":[{"mediaType":"application/vnd.ollama.image.model","digest":"sha256:` + hex + `"}]}`
	if err := os.WriteFile(filepath.Join(dir, tag), []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
}
