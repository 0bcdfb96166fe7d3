// Package chat turns a conversation into the prompt text a model was trained
// on. A model that was fine-tuned for chat only answers well when its turns
// are marked up exactly as in training, and the authoritative markup is the
// Jinja template the model ships in its GGUF metadata
// (tokenizer.chat_template), so that template is rendered with a
// Jinja-compatible engine, with the variables Hugging Face's transformers
// passes (messages, bos_token, eos_token, add_generation_prompt,
// raise_exception) and its settings (trim_blocks, lstrip_blocks).
//
// Templates use Python features a Go engine may lack; when rendering fails
// for such a reason, the family is recognised by its markers and formatted in
// Go instead, so a model with an unusual template still gets its own turn
// markers. A template's own raise_exception is not such a failure: it is the
// model's authors rejecting the conversation, and reaches the caller as a
// *TemplateError.
package chat

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"

	"dovetail/models/gguf"
)

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"` // "system", "user", "assistant", ...
	Content string `json:"content"`
}

// TemplateError is a conversation the template itself refuses (its
// raise_exception), such as a system message for a model that has no system
// role. It is the caller's error, not the server's.
type TemplateError struct{ Message string }

func (e *TemplateError) Error() string { return "chat template: " + e.Message }

// Template renders conversations for one model. It is safe for concurrent
// use.
type Template struct {
	family   Family
	bos, eos string

	mu    sync.Mutex // gonja does not document its templates as safe to share
	jinja *exec.Template
	// parseErr is why the Jinja source could not be used; rendering then
	// goes straight to the family formatter.
	parseErr error
}

// New prepares the Jinja template src, whose bos_token and eos_token are
// the texts bos and eos. An empty src gives the Plain format; a template the
// engine cannot parse falls back to its family's Go formatter (or Plain), so
// New never fails.
func New(src, bos, eos string) *Template {
	t := &Template{family: Detect(src), bos: bos, eos: eos}
	if strings.TrimSpace(src) == "" {
		return t
	}
	t.jinja, t.parseErr = compile(src)
	return t
}

// NewFamily formats conversations with a family's Go formatter only; Raw
// and Plain are families too.
func NewFamily(f Family, bos, eos string) *Template {
	return &Template{family: f, bos: bos, eos: eos}
}

// Family is the formatter used when the Jinja template cannot be rendered.
func (t *Template) Family() Family { return t.family }

// Jinja reports whether renders go through the model's own template.
func (t *Template) Jinja() bool { return t.jinja != nil }

func compile(src string) (*exec.Template, error) {
	cfg := config.New()
	cfg.TrimBlocks = true
	cfg.LeftStripBlocks = true
	// An in-memory loader holding only the template itself: a template from
	// a downloaded model must not {% include %} files from the disk.
	const name = "/chat_template"
	loader, err := loaders.NewMemoryLoader(map[string]string{name: src})
	if err != nil {
		return nil, err
	}
	return exec.NewTemplate(name, cfg, loader, gonja.DefaultEnvironment)
}

// Render returns the prompt text of msgs. addGenerationPrompt appends the
// header of an assistant turn, so that the model answers rather than
// continuing the user's text. The text includes the special-token texts the
// template writes (BOS among them); the caller tokenizes it with special
// tokens parsed.
func (t *Template) Render(msgs []Message, addGenerationPrompt bool) (string, error) {
	if len(msgs) == 0 {
		return "", errors.New("chat: no messages")
	}
	if t.jinja != nil {
		s, err := t.renderJinja(msgs, addGenerationPrompt)
		var te *TemplateError
		if err == nil || errors.As(err, &te) {
			return s, err
		}
	}
	return t.family.format(msgs, addGenerationPrompt, t.bos, t.eos), nil
}

func (t *Template) renderJinja(msgs []Message, addGenerationPrompt bool) (string, error) {
	list := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		list[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	var raised string
	ctx := exec.NewContext(map[string]any{
		"messages":              list,
		"bos_token":             t.bos,
		"eos_token":             t.eos,
		"add_generation_prompt": addGenerationPrompt,
		"raise_exception": func(msg string) (string, error) {
			raised = msg
			return "", errors.New(msg)
		},
	})
	t.mu.Lock()
	out, err := t.jinja.ExecuteToString(ctx)
	t.mu.Unlock()
	if err != nil {
		if raised != "" {
			return "", &TemplateError{Message: raised}
		}
		return "", fmt.Errorf("chat template: %w", err)
	}
	return out, nil
}

// TemplateKey is the GGUF metadata key of a model's chat template.
const TemplateKey = "tokenizer.chat_template"

// FromGGUF prepares the template stored in f (Plain when it has none).
func FromGGUF(f *gguf.File, bos, eos string) *Template {
	src, _ := f.String(TemplateKey)
	return New(src, bos, eos)
}
