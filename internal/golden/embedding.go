package golden

import (
	"encoding/json"
	"fmt"
	"math"
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

// Cosine is the cosine similarity of a and b, summed in float64.
func Cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	return ab / math.Sqrt(aa*bb)
}

// Norm is v's Euclidean length, summed in float64.
func Norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}
