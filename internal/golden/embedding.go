package golden

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// EmbedCase is one model file × prompt of llama.cpp's llama-embedding
// (mean pooling, L2-normalised; see testdata/golden/README.md).
type EmbedCase struct {
	Name      string    `json:"-"` // e.g. stories260K-f32-p1
	Model     string    `json:"-"` // path of the model file
	Prompt    string    `json:"prompt"`
	Tokens    []int     `json:"tokens"`
	Embedding []float32 `json:"embedding"`
}

// EmbedCases loads every embedding case.
func EmbedCases() ([]*EmbedCase, error) {
	paths, err := filepath.Glob(filepath.Join(Root(), "golden", "embedding", "*.json"))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("no embedding cases under %s", Root())
	}
	var out []*EmbedCase
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		var f struct {
			Model string `json:"model"`
			Cases []struct {
				Name string `json:"name"`
				EmbedCase
			} `json:"cases"`
		}
		if err := json.Unmarshal(b, &f); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		for _, c := range f.Cases {
			ec := c.EmbedCase
			ec.Name = strings.TrimSuffix(f.Model, ".gguf") + "-" + c.Name
			ec.Model = ModelPath(f.Model)
			out = append(out, &ec)
		}
	}
	return out, nil
}
