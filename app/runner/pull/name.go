package pull

import (
	"fmt"
	"strings"
)

// The hosts a name can start with, and what they mean.
const (
	ollamaHost  = "registry.ollama.ai"
	ollamaNS    = "library"
	defaultTag  = "latest"
	hfHost      = "hf.co"
	hfLongHost  = "huggingface.co"
	maxPartSize = 128
)

// Ref is a parsed model name: an ollama registry's model
// (HOST/NAMESPACE/MODEL:TAG, the library's host and namespace filled in
// when left out) or a Hugging Face GGUF repository, by quantization
// (hf.co/ORG/REPO:QUANT, which Hugging Face serves over the same registry
// protocol) or by file (hf.co/ORG/REPO/FILE.gguf, which comes from the
// repository's main branch).
type Ref struct {
	Host      string // registry.ollama.ai, hf.co, or a private registry's HOST[:PORT]
	Namespace string // library, a user, or a Hugging Face organisation
	Model     string // the model, or the Hugging Face repository
	Tag       string // the tag or quantization; "" for a file
	File      string // a GGUF file in a Hugging Face repository ("" for a tag), slashes for its folders
}

// HF reports whether the name is a Hugging Face repository's.
func (r Ref) HF() bool { return r.Host == hfHost }

// String is the canonical name: the library's host and namespace left
// out ("llama3.2:1b"), a tag always, Hugging Face as hf.co.
func (r Ref) String() string {
	if r.File != "" {
		return r.Host + "/" + r.Namespace + "/" + r.Model + "/" + r.File
	}
	name := r.Model + ":" + r.Tag
	if r.Host != ollamaHost || r.Namespace != ollamaNS {
		name = r.Namespace + "/" + name
	}
	if r.Host != ollamaHost {
		name = r.Host + "/" + name
	}
	return name
}

// parts are the path of the name's manifest under manifests/, as ollama
// lays its store out: HOST/NAMESPACE/MODEL/TAG, or a file's path in place
// of the tag.
func (r Ref) parts() []string {
	if r.File != "" {
		return append([]string{r.Host, r.Namespace, r.Model}, strings.Split(r.File, "/")...)
	}
	return []string{r.Host, r.Namespace, r.Model, r.Tag}
}

// refOf is the name a manifest's path under manifests/ stands for (ok
// false for a path no name has).
func refOf(parts []string) (Ref, bool) {
	if len(parts) < 4 {
		return Ref{}, false
	}
	r := Ref{Host: parts[0], Namespace: parts[1], Model: parts[2]}
	if r.HF() && strings.HasSuffix(strings.ToLower(parts[len(parts)-1]), ".gguf") {
		r.File = strings.Join(parts[3:], "/")
	} else if len(parts) == 4 {
		r.Tag = parts[3]
	} else {
		return Ref{}, false
	}
	back, err := Parse(r.String())
	return back, err == nil && back == r
}

// Parse reads a model name as ollama does ("llama3.2:1b",
// "library/qwen2.5:0.5b", "HOST[:PORT]/NAMESPACE/MODEL:TAG", a tag of
// "latest" when none is given) and Hugging Face's ("hf.co/ORG/REPO:QUANT",
// "hf.co/ORG/REPO/FILE.gguf", huggingface.co alike, a pasted
// https://huggingface.co/ORG/REPO/blob/main/FILE.gguf too).
func Parse(name string) (Ref, error) {
	s := strings.TrimSpace(name)
	s = strings.TrimPrefix(strings.TrimPrefix(s, "https://"), "http://")
	if s == "" {
		return Ref{}, fmt.Errorf("no model name given")
	}
	if len(s) > 4*maxPartSize {
		return Ref{}, fmt.Errorf("model name %q is too long", name)
	}
	segs := strings.Split(s, "/")
	switch strings.ToLower(segs[0]) {
	case hfHost, hfLongHost, "www." + hfLongHost:
		return parseHF(name, segs[1:])
	}
	var r Ref
	last := segs[len(segs)-1]
	if i := strings.LastIndexByte(last, ':'); i >= 0 {
		r.Tag, segs[len(segs)-1] = last[i+1:], last[:i]
	}
	switch len(segs) {
	case 1:
		r.Host, r.Namespace, r.Model = ollamaHost, ollamaNS, segs[0]
	case 2:
		r.Host, r.Namespace, r.Model = ollamaHost, segs[0], segs[1]
	case 3:
		r.Host, r.Namespace, r.Model = strings.ToLower(segs[0]), segs[1], segs[2]
	default:
		return Ref{}, fmt.Errorf("model name %q has too many parts: it is MODEL[:TAG], NAMESPACE/MODEL[:TAG] or HOST/NAMESPACE/MODEL[:TAG]", name)
	}
	if r.Tag == "" && strings.HasSuffix(name, ":") {
		return Ref{}, fmt.Errorf("model name %q has an empty tag", name)
	}
	if r.Tag == "" {
		r.Tag = defaultTag
	}
	if r.Host == ollamaHost+":443" {
		r.Host = ollamaHost
	}
	if err := checkParts(name, r, false); err != nil {
		return Ref{}, err
	}
	return r, nil
}

// parseHF reads what follows hf.co/: ORG/REPO[:QUANT], or ORG/REPO/FILE.gguf
// (blob/main/ or resolve/main/ before the file, as a browser's address
// has it, is read past).
func parseHF(name string, segs []string) (Ref, error) {
	r := Ref{Host: hfHost}
	if len(segs) < 2 {
		return Ref{}, fmt.Errorf("model name %q names no repository: it is hf.co/ORG/REPO[:QUANT] or hf.co/ORG/REPO/FILE.gguf", name)
	}
	r.Namespace, r.Model = segs[0], segs[1]
	rest := segs[2:]
	if len(rest) == 0 {
		if i := strings.LastIndexByte(r.Model, ':'); i >= 0 {
			r.Model, r.Tag = r.Model[:i], r.Model[i+1:]
			if r.Tag == "" {
				return Ref{}, fmt.Errorf("model name %q has an empty tag", name)
			}
		}
		if r.Tag == "" {
			r.Tag = defaultTag
		}
		return r, checkParts(name, r, true)
	}
	if len(rest) > 2 && (rest[0] == "blob" || rest[0] == "resolve") {
		if rest[1] != "main" {
			return Ref{}, fmt.Errorf("model name %q: only a file on the main branch can be pulled", name)
		}
		rest = rest[2:]
	}
	r.File = strings.Join(rest, "/")
	if !strings.HasSuffix(strings.ToLower(r.File), ".gguf") {
		return Ref{}, fmt.Errorf("model name %q: a file in a Hugging Face repository must be a .gguf file", name)
	}
	return r, checkParts(name, r, true)
}

// checkParts refuses characters no name has: each part is letters,
// digits, '_', '-' and '.', starts with a letter, digit or '_', and has no
// "..", so that no name reaches outside the models folder.
func checkParts(name string, r Ref, hf bool) error {
	host, port, hasPort := strings.Cut(r.Host, ":")
	if !validPart(host, true) || hasPort && (port == "" || strings.Trim(port, "0123456789") != "") {
		return fmt.Errorf("model name %q: %q is not a host", name, r.Host)
	}
	check := []struct{ what, v string }{{"namespace", r.Namespace}, {"model", r.Model}}
	if r.File == "" {
		check = append(check, struct{ what, v string }{"tag", r.Tag})
	}
	for _, p := range strings.Split(r.File, "/") {
		if r.File != "" {
			check = append(check, struct{ what, v string }{"file", p})
		}
	}
	for _, c := range check {
		dots := c.what != "namespace" || hf
		if !validPart(c.v, dots) {
			return fmt.Errorf("model name %q: %q is not a valid %s (letters, digits, '_', '-' and '.')", name, c.v, c.what)
		}
	}
	return nil
}

func validPart(s string, dots bool) bool {
	if s == "" || len(s) > maxPartSize || strings.Contains(s, "..") {
		return false
	}
	for i, c := range []byte(s) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_':
		case (c == '-' || c == '.' && dots) && i > 0:
		default:
			return false
		}
	}
	return true
}

// sameName reports whether two names are the same model: ollama's names
// compare without regard to case.
func sameName(a, b Ref) bool { return strings.EqualFold(a.String(), b.String()) }
