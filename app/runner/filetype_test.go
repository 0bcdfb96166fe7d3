package runner

import (
	"testing"

	"dovetail/internal/golden"
)

// A model's quantization is its file type where the file names one, as
// llama.cpp and ollama call it, though most of its bytes may be of
// another type; a file without one has only the type of most bytes.
func TestDescribeFileType(t *testing.T) {
	cases := []struct{ model, fileType, most string }{
		{"tinystories656K-Q4_0.gguf", "Q4_0", "Q8_0"}, // its embeddings and output are Q8_0
		{"tinystories656K-Q8_0.gguf", "Q8_0", "Q8_0"},
		{"stories260K-Q4_0-mixed.gguf", "", "Q4_0"},
	}
	for _, c := range cases {
		d, err := Describe(golden.ModelPath(c.model))
		if err != nil {
			t.Fatal(err)
		}
		if d.FileType != c.fileType || d.Quantization != c.most {
			t.Errorf("%s: file type %q, most bytes %q; want %q, %q", c.model, d.FileType, d.Quantization, c.fileType, c.most)
		}
	}
}
