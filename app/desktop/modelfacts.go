package desktop

import (
	"fmt"
	"strings"

	"dovetail/app/runner"
	"dovetail/app/runner/discover"
	"dovetail/assets"
)

// modelFacts are what the picker says of a model beside its name, read
// from the file's header without loading it, as /api/tags reads them.
type modelFacts struct {
	params     string // "656K", "8.0B"
	quant      string // as llama.cpp names the file's type ("Q4_K_M"), else the type of most bytes
	size       int64
	completion bool // no chat template: it continues text rather than answering turns
	unreadable bool
}

// describeModel reads m's header. A file that does not read is listed
// still: loading it says what is wrong.
func describeModel(m discover.Model) modelFacts {
	d, err := runner.Describe(m.Path)
	if err != nil {
		return modelFacts{size: m.Size, unreadable: true}
	}
	f := modelFacts{params: runner.ParamSize(d.Params), quant: d.FileType, size: d.Size, completion: isCompletion(d)}
	if f.quant == "" {
		f.quant = d.Quantization
	}
	switch {
	case m.Source == "embedded":
		f.size = int64(len(assets.DefaultModel))
	case m.Size > 0: // an ollama blob's size is the manifest's
		f.size = m.Size
	}
	return f
}

// isCompletion reports a model without a chat template: the chat then
// sends it plain text to continue, as the embedded TinyStories is.
func isCompletion(d runner.Description) bool { return strings.TrimSpace(d.ChatTemplate) == "" }

// sourceWords says where a model came from, where its name does not.
var sourceWords = map[string]string{"ollama": "ollama", "lmstudio": "LM Studio"}

// pickerRow is one model as the picker lists it: name, parameters,
// quantization, size, and "completion model" where it has no chat
// template.
func pickerRow(m discover.Model, f modelFacts) string {
	name := m.Name
	if w, ok := sourceWords[m.Source]; ok {
		name += " (" + w + ")"
	}
	if f.unreadable {
		return name + " — details unreadable"
	}
	parts := []string{f.params + " params", f.quant}
	if f.size > 0 {
		parts = append(parts, runner.HumanBytes(uint64(f.size)))
	}
	if f.completion {
		parts = append(parts, "completion model")
	}
	return fmt.Sprintf("%s — %s", name, strings.Join(parts, " · "))
}
