package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"dovetail/assets"
	"dovetail/models"
	"dovetail/models/gguf"
	"dovetail/models/tokenizer"
)

// loaded is a model ready to run: weights bound and tokenizer built.
type loaded struct {
	Name  string
	Model *models.Llama
	Tok   *tokenizer.Tokenizer
}

// openGGUF opens path, or the embedded default model when path is empty,
// with errors a user can act on.
func openGGUF(path string) (*gguf.File, error) {
	if path == "" {
		return gguf.Parse("embedded:"+assets.DefaultModelName, assets.DefaultModel)
	}
	st, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("model file %s: no such file", path)
	}
	if err != nil {
		return nil, fmt.Errorf("model file %s: %v", path, err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("model file %s: is a directory, want a .gguf file", path)
	}
	return gguf.Open(path)
}

// loadModel binds the weights and tokenizer of path (empty: the default).
func loadModel(path string) (*loaded, error) {
	f, err := openGGUF(path)
	if err != nil {
		return nil, err
	}
	m, err := models.BindLlama(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	tok, err := tokenizer.New(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	name := path
	if name == "" {
		name = assets.DefaultModelName
	}
	return &loaded{Name: name, Model: m, Tok: tok}, nil
}
