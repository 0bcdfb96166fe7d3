// Package discover finds the GGUF models a user already has: files and
// folders they name, the models `dovetail pull` fetched, those ollama
// pulled and those LM Studio downloaded, each listed by the name it has
// there.
package discover

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"dovetail/app/runner/pull"
)

// Model is a GGUF file found.
type Model struct {
	Name   string `json:"name"`   // as its source names it: a file name, "llama3:8b", "publisher/repo/file.gguf"
	Path   string `json:"path"`   // the GGUF file
	Source string `json:"source"` // file, pulled, ollama or lmstudio
	Size   int64  `json:"size_bytes"`
	// Params are a pulled model's own defaults, its manifest's (stop
	// words, temperature...); nil for others.
	Params map[string]any `json:"-"`
}

// Pulled is the model dovetail pull fetched as m.
func Pulled(m pull.Model) Model {
	return Model{Name: m.Name, Path: m.Path, Source: "pulled", Size: m.Size, Params: m.Params}
}

// Places are where to look. Empty fields are not looked at.
type Places struct {
	Paths    []string // files and folders the user named
	Pulled   []string // Dovetail's models folders (pull.Dir)
	Ollama   []string // ollama's model stores (each holding manifests/ and blobs/)
	LMStudio []string // LM Studio's model folders
}

// UserPlaces are the models folder `dovetail pull` fills (pull.Dir) and
// ollama's and LM Studio's usual stores for this user: $OLLAMA_MODELS or
// ~/.ollama/models (and a system service's
// /usr/share/ollama/.ollama/models), ~/.lmstudio/models and
// ~/.cache/lm-studio/models.
func UserPlaces(home string) Places {
	var p Places
	if d, err := pull.Dir(); err == nil {
		p.Pulled = []string{d}
	}
	if d := os.Getenv("OLLAMA_MODELS"); d != "" {
		p.Ollama = append(p.Ollama, d)
	}
	p.Ollama = append(p.Ollama, filepath.Join(home, ".ollama", "models"), "/usr/share/ollama/.ollama/models")
	p.LMStudio = []string{filepath.Join(home, ".lmstudio", "models"), filepath.Join(home, ".cache", "lm-studio", "models")}
	return p
}

// Find lists the models in places, each file once (the first place to
// name it wins), by source and name. A path the user named that is
// neither a GGUF file nor a folder is an error; stores that are not there
// are skipped.
func Find(p Places) ([]Model, error) {
	var out []Model
	seen := map[string]bool{}
	add := func(ms []Model) {
		for _, m := range ms {
			abs, err := filepath.Abs(m.Path)
			if err == nil && !seen[abs] {
				seen[abs] = true
				out = append(out, m)
			}
		}
	}
	for _, path := range p.Paths {
		ms, err := fromPath(path)
		if err != nil {
			return nil, err
		}
		add(ms)
	}
	for _, dir := range p.Pulled {
		add(fromPulled(dir))
	}
	for _, dir := range p.Ollama {
		add(fromOllama(dir))
	}
	for _, dir := range p.LMStudio {
		add(fromLMStudio(dir))
	}
	return out, nil
}

// fromPath is a GGUF file, or the GGUF files under a folder.
func fromPath(path string) ([]Model, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("models: %w", err)
	}
	if !st.IsDir() {
		if !isGGUF(path) {
			return nil, fmt.Errorf("models: %s is not a GGUF file", path)
		}
		if why := notAModel(path); why != "" {
			return nil, fmt.Errorf("models: %s is %s, not a model", path, why)
		}
		return []Model{{Name: filepath.Base(path), Path: path, Source: "file", Size: st.Size()}}, nil
	}
	var out []Model
	for _, f := range ggufFiles(path) {
		rel, _ := filepath.Rel(path, f.path)
		out = append(out, Model{Name: filepath.ToSlash(rel), Path: f.path, Source: "file", Size: f.size})
	}
	return out, nil
}

type file struct {
	path string
	size int64
}

// ggufFiles lists the model files under dir: not vision projectors
// (mmproj), adapters or drafts (notAModel), and of a model split in parts
// only its first.
func ggufFiles(dir string) []file {
	var out []file
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		name := strings.ToLower(e.Name())
		if e.IsDir() {
			if strings.HasPrefix(name, ".") && p != dir {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".gguf") || strings.HasPrefix(name, "mmproj") || isLaterPart(name) {
			return nil
		}
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() && notAModel(p) == "" {
			out = append(out, file{p, info.Size()})
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// isLaterPart reports a split model's part after the first
// ("…-00002-of-00003.gguf").
func isLaterPart(name string) bool {
	base := strings.TrimSuffix(name, ".gguf")
	i := strings.LastIndex(base, "-of-")
	if i < 6 {
		return false
	}
	part := base[i-5 : i]
	return strings.Trim(part, "0123456789") == "" && part != "00001"
}

// isGGUF reports whether a file starts as a GGUF file does.
func isGGUF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	_, err = f.Read(magic[:])
	return err == nil && string(magic[:]) == "GGUF"
}

// manifest is what of an ollama manifest names the model's weights.
type manifest struct {
	Layers []struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Size      int64  `json:"size"`
	} `json:"layers"`
}

const ollamaModelLayer = "application/vnd.ollama.image.model"

// fromOllama lists the models of an ollama store: each manifest
// (manifests/HOST/NAMESPACE/MODEL/TAG) names its weights as a blob
// (blobs/sha256-HEX), a GGUF file. Names are as `ollama list` writes them:
// "llama3:8b" for the library, "user/model:tag" otherwise, with the host
// in front when it is not ollama's registry.
func fromOllama(store string) []Model {
	root := filepath.Join(store, "manifests")
	var out []Model
	filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return nil
		}
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if len(parts) != 4 {
			return nil
		}
		blob, size, err := ollamaBlob(store, p)
		if err != nil {
			return nil
		}
		out = append(out, Model{Name: ollamaName(parts), Path: blob, Source: "ollama", Size: size})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func ollamaName(p []string) string {
	host, ns, model, tag := p[0], p[1], p[2], p[3]
	name := model + ":" + tag
	if ns != "library" || host != "registry.ollama.ai" {
		name = ns + "/" + name
	}
	if host != "registry.ollama.ai" {
		name = host + "/" + name
	}
	return name
}

// ollamaBlob is the GGUF blob a manifest names.
func ollamaBlob(store, manifestPath string) (string, int64, error) {
	data, err := os.ReadFile(manifestPath)
	if err != nil {
		return "", 0, err
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return "", 0, err
	}
	for _, l := range m.Layers {
		hex, ok := strings.CutPrefix(l.Digest, "sha256:")
		if l.MediaType != ollamaModelLayer || !ok || strings.ContainsAny(hex, `/\.`) {
			continue
		}
		path := filepath.Join(store, "blobs", "sha256-"+hex)
		if st, err := os.Stat(path); err == nil && isGGUF(path) {
			return path, st.Size(), nil
		}
	}
	return "", 0, errors.New("no GGUF layer")
}

// fromPulled lists the models `dovetail pull` fetched into dir, by the
// names they were pulled as.
func fromPulled(dir string) []Model {
	ms, _ := pull.List(dir)
	var out []Model
	for _, m := range ms {
		out = append(out, Pulled(m))
	}
	return out
}

// fromLMStudio lists LM Studio's models, PUBLISHER/REPO/FILE.gguf, by that
// name.
func fromLMStudio(dir string) []Model {
	var out []Model
	for _, f := range ggufFiles(dir) {
		rel, err := filepath.Rel(dir, f.path)
		if err != nil {
			continue
		}
		out = append(out, Model{Name: filepath.ToSlash(rel), Path: f.path, Source: "lmstudio", Size: f.size})
	}
	return out
}
