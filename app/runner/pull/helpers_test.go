package pull

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The test model: a real GGUF file, so that what discover reads reads it.
const testModelFile = "../../../testdata/models/stories260K/stories260K-Q4_0-mixed.gguf"

func init() {
	retryBase = time.Millisecond // the retries' waits, not their number, shrink
}

func testModel(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(testModelFile)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// fakeHub is a registry speaking ollama's protocol (and, under /ORG/REPO/
// resolve/main/, Hugging Face's file downloads) whose blobs redirect
// (307) to a second server, the storage host, as the real ones do.
type fakeHub struct {
	t       *testing.T
	reg     *httptest.Server
	storage *httptest.Server

	mu        sync.Mutex
	manifests map[string]manifest // "ns/model:tag"
	files     map[string]string   // "org/repo/FILE" -> digest
	gitFiles  map[string][]byte   // "org/repo/FILE" -> bytes, kept in git (no LFS): served by the Hub itself
	blobs     map[string][]byte   // digest -> bytes
	etag      map[string]string   // a file's X-Linked-Etag by digest (a git file's ETag by path), when not its digest

	// What the storage host saw: each blob GET's Range header (""
	// without one) and Authorization header.
	ranges    []string
	storeAuth []string
	manifestN int

	token        string            // the registry wants "Bearer token" (401 without it)
	limit        int               // the first limit manifest requests are answered 429
	cut          map[string]int64  // a blob's first GET sends only this many bytes, then closes
	stallAt      map[string]int64  // a blob's first GET sends this many bytes, then nothing
	release      chan struct{}     // closed: a stalled body ends
	ignoreRange  bool              // the storage answers every GET with 200 and all the bytes
	bodyOverride map[string][]byte // the storage sends these bytes for a digest instead
}

func newHub(t *testing.T) *fakeHub {
	h := &fakeHub{t: t, manifests: map[string]manifest{}, files: map[string]string{}, gitFiles: map[string][]byte{}, blobs: map[string][]byte{},
		etag: map[string]string{}, cut: map[string]int64{}, stallAt: map[string]int64{}, release: make(chan struct{}),
		bodyOverride: map[string][]byte{}}
	h.storage = httptest.NewServer(http.HandlerFunc(h.serveStorage))
	h.reg = httptest.NewServer(http.HandlerFunc(h.serveRegistry))
	t.Cleanup(func() {
		h.mu.Lock()
		select {
		case <-h.release:
		default:
			close(h.release)
		}
		h.mu.Unlock()
		h.reg.Close()
		h.storage.Close()
	})
	return h
}

// addModel publishes ns/model:tag with a GGUF layer (and params, if any).
func (h *fakeHub) addModel(name string, gguf []byte, params map[string]any) manifest {
	m := manifest{SchemaVersion: 2, MediaType: manifestType}
	m.Config = &layer{MediaType: "application/vnd.docker.container.image.v1+json", Digest: h.addBlob([]byte("{}")), Size: 2}
	m.Layers = append(m.Layers, layer{MediaType: modelLayer, Digest: h.addBlob(gguf), Size: int64(len(gguf))})
	m.Layers = append(m.Layers, layer{MediaType: "application/vnd.ollama.image.template", Digest: h.addBlob([]byte("{{ .Prompt }}")), Size: 13})
	if params != nil {
		p, _ := json.Marshal(params)
		m.Layers = append(m.Layers, layer{MediaType: paramsLayer, Digest: h.addBlob(p), Size: int64(len(p))})
	}
	h.mu.Lock()
	h.manifests[name] = m
	h.mu.Unlock()
	return m
}

func (h *fakeHub) addBlob(b []byte) string {
	d := digestOf(b)
	h.mu.Lock()
	h.blobs[d] = b
	h.mu.Unlock()
	return d
}

// addFile publishes a Hugging Face repository's file.
func (h *fakeHub) addFile(path string, b []byte) string {
	d := h.addBlob(b)
	h.mu.Lock()
	h.files[path] = d
	h.mu.Unlock()
	return d
}

func (h *fakeHub) authorized(w http.ResponseWriter, r *http.Request) bool {
	if h.token == "" || r.Header.Get("Authorization") == "Bearer "+h.token {
		return true
	}
	http.Error(w, `{"error":"Invalid credentials in Authorization header"}`, http.StatusUnauthorized)
	return false
}

func (h *fakeHub) serveRegistry(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.authorized(w, r) {
		return
	}
	p := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case len(p) == 5 && p[0] == "v2" && p[3] == "manifests":
		h.manifestN++
		if h.manifestN <= h.limit {
			w.Header().Set("Retry-After", "0")
			http.Error(w, `{"errors":[{"code":"TOOMANYREQUESTS","message":"slow down"}]}`, http.StatusTooManyRequests)
			return
		}
		if r.Header.Get("Accept") != manifestType {
			http.Error(w, "wrong Accept", http.StatusBadRequest)
			return
		}
		m, ok := h.manifests[p[1]+"/"+p[2]+":"+p[4]]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`)
			return
		}
		w.Header().Set("Content-Type", manifestType)
		json.NewEncoder(w).Encode(m)
	case len(p) == 5 && p[0] == "v2" && p[3] == "blobs":
		if _, ok := h.blobs[p[4]]; !ok {
			http.NotFound(w, r)
			return
		}
		http.Redirect(w, r, h.storage.URL+"/store/"+p[4]+"?sig=x", http.StatusTemporaryRedirect)
	case len(p) >= 5 && p[2] == "resolve" && p[3] == "main":
		if b, ok := h.gitFiles[p[0]+"/"+p[1]+"/"+strings.Join(p[4:], "/")]; ok {
			// A file in git: the Hub answers itself, its ETag git's blob id.
			etag := gitBlobID(b)
			if e, ok := h.etag[p[0]+"/"+p[1]+"/"+strings.Join(p[4:], "/")]; ok {
				etag = e
			}
			w.Header().Set("ETag", `"`+etag+`"`)
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			if r.Method == http.MethodGet {
				w.Write(b)
			}
			return
		}
		d, ok := h.files[p[0]+"/"+p[1]+"/"+strings.Join(p[4:], "/")]
		if !ok {
			http.Error(w, "Entry not found", http.StatusNotFound)
			return
		}
		etag := strings.TrimPrefix(d, "sha256:")
		if e, ok := h.etag[d]; ok {
			etag = e
		}
		w.Header().Set("X-Linked-Etag", `"`+etag+`"`)
		w.Header().Set("X-Linked-Size", strconv.Itoa(len(h.blobs[d])))
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef01234567"`) // the git pointer's, as the Hub sends
		http.Redirect(w, r, h.storage.URL+"/store/"+d+"?sig=x", http.StatusFound)
	default:
		http.NotFound(w, r)
	}
}

func (h *fakeHub) serveStorage(w http.ResponseWriter, r *http.Request) {
	d := strings.TrimPrefix(r.URL.Path, "/store/")
	h.mu.Lock()
	b, ok := h.blobs[d]
	if o, ok := h.bodyOverride[d]; ok {
		b = o
	}
	rng := r.Header.Get("Range")
	if r.Method == http.MethodGet {
		h.ranges = append(h.ranges, rng)
		h.storeAuth = append(h.storeAuth, r.Header.Get("Authorization"))
	}
	cut, cutOK := h.cut[d]
	delete(h.cut, d)
	stall, stallOK := h.stallAt[d]
	delete(h.stallAt, d)
	ignore, release := h.ignoreRange, h.release
	h.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	var start int64
	if s, ok := strings.CutPrefix(rng, "bytes="); ok && !ignore {
		start, _ = strconv.ParseInt(strings.TrimSuffix(s, "-"), 10, 64)
		if start >= int64(len(b)) {
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, len(b)-1, len(b)))
	}
	body := b[start:]
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	if start > 0 {
		w.WriteHeader(http.StatusPartialContent)
	}
	if r.Method == http.MethodHead {
		return
	}
	switch {
	case cutOK:
		w.Write(body[:cut]) // the handler returns short: the connection closes mid-body
	case stallOK:
		w.Write(body[:stall])
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	default:
		w.Write(body)
	}
}

// opts are a pull's options against the hub: its registry as ollama's
// (DOVETAIL_REGISTRY) and as Hugging Face's (HF_ENDPOINT).
func (h *fakeHub) opts(dir string, env map[string]string) (Options, *[]Progress) {
	var mu sync.Mutex
	var seen []Progress
	e := map[string]string{"DOVETAIL_REGISTRY": h.reg.URL, "HF_ENDPOINT": h.reg.URL}
	for k, v := range env {
		e[k] = v
	}
	return Options{Dir: dir, Env: func(k string) string { return e[k] }, Progress: func(p Progress) {
		mu.Lock()
		seen = append(seen, p)
		mu.Unlock()
	}}, &seen
}

func (h *fakeHub) seenRanges() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.ranges...)
}

// noLeftovers fails if dir's blobs/ holds a partial file.
func noPartials(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir + "/blobs")
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), "-partial") {
			t.Errorf("partial file left: %s", e.Name())
		}
	}
}

func pullCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func newServer(t *testing.T, h http.Handler) *httptest.Server {
	s := httptest.NewServer(h)
	t.Cleanup(s.Close)
	return s
}
