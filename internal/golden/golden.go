// Package golden loads the llama.cpp reference outputs in testdata/golden:
// greedy generations with prompt logits and final hidden states, made on the
// test models. Only tests use it.
package golden

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Step is one greedy step: the chosen token and the top logits it came from.
type Step struct {
	Token int          `json:"token"`
	Piece string       `json:"piece"`
	Top   [][2]float64 `json:"top"`
}

// Case is one model file × prompt.
type Case struct {
	Name         string // e.g. stories260K-f32-p1
	Model        string // path of the model file
	Prompt       string `json:"prompt"`
	NVocab       int    `json:"n_vocab"`
	NEmbd        int    `json:"n_embd"`
	PromptTokens []int  `json:"prompt_tokens"`
	Steps        []Step `json:"steps"`
	Text         string `json:"text"`

	PromptLogits [][]float32 // per prompt position
	StepLogits   [][]float32 // steps 0 and 1
	Hidden       [][]float32 // per position of prompt + generated tokens
}

// Tokens returns the generated tokens.
func (c *Case) Tokens() []int {
	t := make([]int, len(c.Steps))
	for i, s := range c.Steps {
		t[i] = s.Token
	}
	return t
}

// Root is the repository's testdata directory.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata")
}

// ModelPath returns the path of a test model file by its base name.
func ModelPath(name string) string {
	dir := "stories260K"
	if strings.HasPrefix(name, "tinystories656K") {
		dir = "tinystories656K"
	}
	return filepath.Join(Root(), "models", dir, name)
}

// Cases loads every greedy case.
func Cases() ([]*Case, error) {
	paths, err := filepath.Glob(filepath.Join(Root(), "golden", "greedy", "*.json"))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("no golden cases under %s", Root())
	}
	var cs []*Case
	for _, p := range paths {
		c, err := Load(strings.TrimSuffix(p, ".json"))
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// Load reads one case from its path without extension.
func Load(base string) (*Case, error) {
	b, err := os.ReadFile(base + ".json")
	if err != nil {
		return nil, err
	}
	c := &Case{Name: filepath.Base(base)}
	var hdr struct {
		Model string `json:"model"`
	}
	if err := json.Unmarshal(b, &hdr); err != nil {
		return nil, fmt.Errorf("%s.json: %w", base, err)
	}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("%s.json: %w", base, err)
	}
	c.Model = ModelPath(hdr.Model)
	if c.PromptLogits, err = matrix(base+".prompt_logits.f32", c.NVocab); err != nil {
		return nil, err
	}
	if c.StepLogits, err = matrix(base+".step_logits.f32", c.NVocab); err != nil {
		return nil, err
	}
	if c.Hidden, err = matrix(base+".hidden.f32", c.NEmbd); err != nil {
		return nil, err
	}
	return c, nil
}

func matrix(path string, cols int) ([][]float32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if cols <= 0 || len(b)%(4*cols) != 0 {
		return nil, fmt.Errorf("%s: %d bytes is not rows of %d float32", path, len(b), cols)
	}
	m := make([][]float32, len(b)/(4*cols))
	for r := range m {
		m[r] = make([]float32, cols)
		for i := range m[r] {
			m[r][i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*(r*cols+i):]))
		}
	}
	return m, nil
}

// Compare returns the largest absolute difference between got and want and
// that difference relative to the largest magnitude in want.
func Compare(got, want []float32) (maxAbs, rel float64) {
	var scale float64
	for i := range want {
		maxAbs = math.Max(maxAbs, math.Abs(float64(got[i])-float64(want[i])))
		scale = math.Max(scale, math.Abs(float64(want[i])))
	}
	if scale == 0 {
		return maxAbs, maxAbs
	}
	return maxAbs, maxAbs / scale
}
