// Package registrytest is an ollama registry for tests, on httptest: the
// docker v2 protocol's manifests and blobs (Range and HEAD answered), a
// blob that can be made to stop halfway, and a record of the ranges asked
// for; and Hugging Face's file downloads (/ORG/REPO/resolve/main/FILE)
// for repositories of files, such as an EAGLE draft's.
package registrytest

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Registry serves models by name ("library/tiny:1b").
type Registry struct {
	*httptest.Server

	mu        sync.Mutex
	manifests map[string][]byte // by "namespace/model:tag"
	blobs     map[string][]byte // by digest
	files     map[string][]byte // Hugging Face repositories' files, by "org/repo/FILE"
	stallAt   int64             // >0: a blob stops after this many bytes until released
	released  chan struct{}
	ranges    []string
}

// New starts a registry, closed when the test ends.
func New(t testing.TB) *Registry {
	r := &Registry{manifests: map[string][]byte{}, blobs: map[string][]byte{}, files: map[string][]byte{}}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

// Env is pull.Options.Env pointing ollama's registry and Hugging Face
// here.
func (r *Registry) Env(key string) string {
	if key == "DOVETAIL_REGISTRY" || key == "HF_ENDPOINT" {
		return r.URL
	}
	return ""
}

// AddRepoFile serves a Hugging Face repository's file (repo "org/repo")
// as the Hub does: a .json file kept in git, its ETag git's blob id; any
// other in LFS, X-Linked-Etag its SHA-256 and X-Linked-Size its size.
func (r *Registry) AddRepoFile(repo, file string, b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.files[repo+"/"+file] = b
}

// AddRepoDir serves each file of dir as a file of repo's.
func (r *Registry) AddRepoDir(repo, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		r.AddRepoFile(repo, e.Name(), b)
	}
	return nil
}

// serveFile answers /ORG/REPO/resolve/main/FILE.
func (r *Registry) serveFile(w http.ResponseWriter, req *http.Request, path string) {
	r.mu.Lock()
	b, found := r.files[path]
	if found && req.Method == http.MethodGet {
		r.ranges = append(r.ranges, req.Header.Get("Range"))
	}
	r.mu.Unlock()
	if !found {
		http.Error(w, "Entry not found", http.StatusNotFound)
		return
	}
	if strings.HasSuffix(path, ".json") {
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", len(b))
		h.Write(b)
		w.Header().Set("ETag", `"`+hex.EncodeToString(h.Sum(nil))+`"`)
	} else {
		sum := sha256.Sum256(b)
		w.Header().Set("X-Linked-Etag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(b)))
	}
	http.ServeContent(w, req, "", time.Time{}, bytes.NewReader(b))
}

// Add serves a model: its GGUF weights, and its params layer when params
// is not nil. It returns the weights' digest.
func (r *Registry) Add(name string, gguf []byte, params map[string]any) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	type layer struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Size      int64  `json:"size"`
	}
	blob := func(mediaType string, b []byte) layer {
		sum := sha256.Sum256(b)
		d := "sha256:" + hex.EncodeToString(sum[:])
		r.blobs[d] = b
		return layer{mediaType, d, int64(len(b))}
	}
	model := blob("application/vnd.ollama.image.model", gguf)
	layers := []layer{model}
	if params != nil {
		p, _ := json.Marshal(params)
		layers = append(layers, blob("application/vnd.ollama.image.params", p))
	}
	config := blob("application/vnd.docker.container.image.v1+json", []byte(`{"model_format":"gguf"}`))
	m, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
		"config": config, "layers": layers})
	r.manifests[name] = m
	return model.Digest
}

// Stall makes blobs stop after n bytes, the connection held open, until
// Release (or the client goes away).
func (r *Registry) Stall(n int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stallAt, r.released = n, make(chan struct{})
}

// Release lets stalled and later blobs go to their end.
func (r *Registry) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stallAt > 0 {
		close(r.released)
	}
	r.stallAt = 0
}

// Ranges are the Range headers of the blob requests, in order ("" for
// none).
func (r *Registry) Ranges() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.ranges...)
}

func (r *Registry) serve(w http.ResponseWriter, req *http.Request) {
	path, ok := strings.CutPrefix(req.URL.Path, "/v2/")
	if !ok {
		if p := strings.SplitN(strings.TrimPrefix(req.URL.Path, "/"), "/", 5); len(p) == 5 && p[2] == "resolve" && p[3] == "main" {
			r.serveFile(w, req, p[0]+"/"+p[1]+"/"+p[4])
			return
		}
		http.NotFound(w, req)
		return
	}
	if repo, tag, ok := strings.Cut(path, "/manifests/"); ok {
		r.mu.Lock()
		m, found := r.manifests[repo+":"+tag]
		r.mu.Unlock()
		if !found {
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`))
			return
		}
		w.Header().Set("Content-Type", "application/vnd.docker.distribution.manifest.v2+json")
		w.Write(m)
		return
	}
	if _, digest, ok := strings.Cut(path, "/blobs/"); ok {
		r.serveBlob(w, req, digest)
		return
	}
	http.NotFound(w, req)
}

func (r *Registry) serveBlob(w http.ResponseWriter, req *http.Request, digest string) {
	r.mu.Lock()
	b, found := r.blobs[digest]
	stall, released := r.stallAt, r.released
	if req.Method == http.MethodGet {
		r.ranges = append(r.ranges, req.Header.Get("Range"))
	}
	r.mu.Unlock()
	if !found {
		http.NotFound(w, req)
		return
	}
	if stall <= 0 || req.Method != http.MethodGet || req.Header.Get("Range") != "" || int64(len(b)) <= stall {
		http.ServeContent(w, req, "", time.Time{}, strings.NewReader(string(b)))
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("Accept-Ranges", "bytes")
	w.WriteHeader(http.StatusOK)
	w.Write(b[:stall])
	http.NewResponseController(w).Flush()
	select {
	case <-released:
		w.Write(b[stall:])
	case <-req.Context().Done():
	}
}
