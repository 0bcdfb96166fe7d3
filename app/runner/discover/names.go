package discover

import "strings"

// ollama's clients name a model "name:tag", a name without a tag meaning
// ":latest", and may spell a library model in full
// ("registry.ollama.ai/library/llama3:8b"); names compare without regard
// to case. A file here has no tag of its own: it is its base name, with or
// without ".gguf", at ":latest".

// Canonical is the form two names share when ollama would resolve them to
// the same model: lower case, the library's host and namespace dropped,
// ".gguf" dropped, and a tag always (":latest" when none is given).
func Canonical(name string) string {
	repo, tag := splitTag(strings.ToLower(strings.TrimSpace(name)))
	if tag == "" {
		tag = "latest"
	}
	repo = strings.TrimSuffix(repo, ".gguf")
	repo = strings.TrimPrefix(repo, "registry.ollama.ai/")
	repo = strings.TrimPrefix(repo, "library/")
	return repo + ":" + tag
}

// Tagged is the model's name as ollama's clients expect it in a list: with
// a tag. An ollama model's name has one already ("llama3:8b"); a file is
// its name without ".gguf", at ":latest".
func (m Model) Tagged() string {
	if _, tag := splitTag(m.Name); tag != "" {
		return m.Name
	}
	return strings.TrimSuffix(m.Name, ".gguf") + ":latest"
}

// splitTag splits "repo:tag"; a colon before the last slash is a host's
// port, not a tag.
func splitTag(name string) (repo, tag string) {
	i := strings.LastIndexByte(name, ':')
	if i < 0 || i < strings.LastIndexByte(name, '/') {
		return name, ""
	}
	return name[:i], name[i+1:]
}
