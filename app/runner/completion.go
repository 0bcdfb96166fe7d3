package runner

import (
	"strings"

	"dovetail/models/chat"
	"dovetail/models/gguf"
)

// IsCompletion reports a completion model: one without a chat template
// (the embedded TinyStories model, a base model), which continues text
// rather than answering turns. Front ends say so, so that a reply that
// starts mid-sentence is not taken for a broken one.
func (m *Model) IsCompletion() bool { return m.completion }

// ContinuesPrompt reports whether a reply continues the prompt's text
// itself, with nothing between: the conversation goes to the model as its
// contents alone (the embedded model), not as "user:"/"assistant:" lines.
func (m *Model) ContinuesPrompt() bool { return m.Chat.Family() == chat.Raw && !m.Chat.Jinja() }

// NoChatTemplate reports a GGUF file without a chat template: a model
// picker can call a file a completion model before loading it (open it
// with OpenGGUF; the embedded model, path "", is one).
func NoChatTemplate(f *gguf.File) bool {
	src, _ := f.String(chat.TemplateKey)
	return strings.TrimSpace(src) == ""
}
