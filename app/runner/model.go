package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"dovetail/assets"
	"dovetail/cpu/kernels"
	"dovetail/models"
	"dovetail/models/chat"
	"dovetail/models/draft"
	"dovetail/models/gguf"
	"dovetail/models/tokenizer"
)

// Model is an open model: weights bound, tokenizer and chat template
// built, the CPU kernels that will run it chosen.
type Model struct {
	// Name is what front ends call the model: the file's base name, or
	// the embedded model's.
	Name string
	// Path is the file as given, "" for the embedded model.
	Path        string
	Llama       *models.Llama
	Tok         *tokenizer.Tokenizer
	Chat        *chat.Template
	Fingerprint string // of the weights' shapes and vocabulary: what a draft is made for
	// Kernels is the CPU kernel level that runs it ("avx2", ...), and
	// KernelNotice, when not empty, what a user should know about it (no
	// SIMD kernels in this build).
	Kernels, KernelNotice string
	completion            bool // no chat template: see IsCompletion
}

// Embedded reports whether m is the model shipped in the binary.
func (m *Model) Embedded() bool { return m.Path == "" }

// Close releases the weights.
func (m *Model) Close() error { return m.Llama.Close() }

// Config is the model's shape.
func (m *Model) Config() models.Config { return m.Llama.Config }

// OpenModel opens a GGUF file, or the embedded default model when path is
// empty, with errors a user can act on.
func OpenModel(path string) (*Model, error) {
	k, err := kernels.Best()
	if err != nil {
		return nil, err
	}
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
	out := &Model{Name: assets.DefaultModelName, Path: path, Llama: m, Tok: tok,
		Fingerprint: draft.Fingerprint(f), Kernels: k.Name, completion: path == "" || NoChatTemplate(f)}
	if path != "" {
		out.Name = filepath.Base(path)
	}
	if k.Name == "go" {
		out.KernelNotice = kernels.Notice()
	}
	if out.Embedded() {
		// TinyStories writes stories, it does not chat: any markup would
		// be text it never saw, so messages become a plain prompt.
		out.Chat = chat.NewFamily(chat.Raw, "", "")
	} else {
		out.Chat = chat.FromGGUF(f, tok.TokenText(tok.BOS()), tok.TokenText(tok.EOS()))
	}
	return out, nil
}

// OpenGGUF opens a GGUF file (empty: the embedded model) without binding
// it: what `show` reads.
func OpenGGUF(path string) (*gguf.File, error) { return openGGUF(path) }

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

// SameVocab checks that two models tokenize alike, token for token: a
// draft model must.
func SameVocab(a, b *Model) error {
	if a.Tok.VocabSize() != b.Tok.VocabSize() {
		return fmt.Errorf("vocabularies differ in size (%d and %d tokens)", a.Tok.VocabSize(), b.Tok.VocabSize())
	}
	for id := 0; id < a.Tok.VocabSize(); id++ {
		if a.Tok.TokenText(id) != b.Tok.TokenText(id) {
			return fmt.Errorf("vocabularies differ at token %d (%q and %q)", id, a.Tok.TokenText(id), b.Tok.TokenText(id))
		}
	}
	return nil
}

// KernelLevel names the CPU kernels this machine runs ("avx2", ...), or
// the reason none can.
func KernelLevel() string {
	k, err := kernels.Best()
	if err != nil {
		return err.Error()
	}
	return k.Name
}
