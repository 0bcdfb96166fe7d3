package runner

import (
	"path/filepath"
	"testing"

	"dovetail/internal/golden"
	"dovetail/models/gguf"
)

// The embedded model is a completion model whose replies continue the
// prompt's text; a file without a chat template is a completion model
// too (its conversation goes as "user:" lines); a file with one is not.
func TestIsCompletion(t *testing.T) {
	m := open(t, "")
	if !m.IsCompletion() || !m.ContinuesPrompt() {
		t.Errorf("embedded: completion %v, continues the prompt %v", m.IsCompletion(), m.ContinuesPrompt())
	}
	plain := openPath(t, golden.ModelPath("stories260K-f32.gguf"))
	if !plain.IsCompletion() || plain.ContinuesPrompt() {
		t.Errorf("stories260K: completion %v, continues the prompt %v", plain.IsCompletion(), plain.ContinuesPrompt())
	}
	f, err := gguf.Open(filepath.Join(golden.Root(), "golden", "tokenizer", "ggml-vocab-llama-bpe.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if NoChatTemplate(f) {
		t.Error("Llama 3's vocabulary file has a chat template")
	}
}
