// Package pull gets models by name: from ollama's registry (or another
// that speaks its protocol) and from Hugging Face's GGUF repositories,
// into the user's models folder, resumable and verified; EAGLE drafts
// from Hugging Face repositories too (config.json and safetensors or
// pytorch_model.bin, under drafts/hf.co/ORG/REPO); and lists, finds,
// copies and removes what it pulled there.
//
// The folder is laid out as ollama's store is (manifests/HOST/NAMESPACE/
// MODEL/TAG naming blobs/sha256-HEX), so that one model under two names
// is one file, and a marker file says the folder is Dovetail's: nothing
// here writes to or deletes from a folder without it (another program's
// store).
package pull

import (
	"errors"
	"net/http"
	"time"
)

// ErrNotFound is what errors.Is finds in the error for a model that is
// not there: the registry has no such name, or it was never pulled.
var ErrNotFound = errors.New("model not found")

// Progress is one step of a pull, as ollama's /api/pull streams it.
type Progress struct {
	Status    string `json:"status"`              // "pulling manifest", "pulling <12 hex>", "verifying sha256 digest", "writing manifest", "success"
	Digest    string `json:"digest,omitempty"`    // "sha256:…" while a blob downloads
	Total     int64  `json:"total,omitempty"`     // the blob's bytes
	Completed int64  `json:"completed,omitempty"` // of them, here so far
}

// Options say where a pull puts the model and how it reaches the
// registry.
type Options struct {
	Dir      string       // the models folder ("": Dir())
	Insecure bool         // plain HTTP to a private registry
	Client   *http.Client // nil: one with connect and idle timeouts, none overall (big files)
	Progress func(Progress)
	// Env reads HF_ENDPOINT (Hugging Face's base), HF_TOKEN (sent as a
	// bearer token to it) and DOVETAIL_REGISTRY (ollama's registry's
	// base, for a mirror). nil: os.Getenv.
	Env func(string) string
}

// Model is a model pulled into the models folder.
type Model struct {
	Name   string         `json:"name"` // canonical (Ref.String)
	Path   string         `json:"path"` // the GGUF file
	Size   int64          `json:"size_bytes"`
	Digest string         `json:"digest"`           // "sha256:…"
	Params map[string]any `json:"params,omitempty"` // the manifest's params layer (stop, temperature, ...); nil if none
	Pulled time.Time      `json:"pulled"`
	// Draft is set when the name was an EAGLE draft's repository: Path is
	// then its folder (--draft eagle:PATH), not a model to run.
	Draft *Draft `json:"draft,omitempty"`
}
