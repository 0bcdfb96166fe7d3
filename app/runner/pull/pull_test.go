package pull

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A pull from ollama's registry: the manifest, the GGUF layer and the
// params behind a 307 to the storage host, each verified; the model is
// listed by its name with its params, and the progress is ollama's.
func TestPullRegistry(t *testing.T) {
	h := newHub(t)
	gguf := testModel(t)
	h.addModel("library/tiny:1b", gguf, map[string]any{"stop": []string{"<|eot|>"}, "temperature": 0.7})
	dir := t.TempDir()
	o, seen := h.opts(dir, nil)
	m, err := Pull(pullCtx(t), "tiny:1b", o)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "tiny:1b" || m.Size != int64(len(gguf)) || m.Digest != digestOf(gguf) {
		t.Errorf("model = %+v", m)
	}
	if got, _ := os.ReadFile(m.Path); !reflect.DeepEqual(got, gguf) {
		t.Error("the pulled file is not the blob")
	}
	if m.Params["temperature"] != 0.7 || !reflect.DeepEqual(m.Params["stop"], []any{"<|eot|>"}) {
		t.Errorf("params = %v", m.Params)
	}
	if m.Pulled.IsZero() {
		t.Error("no pull time")
	}
	statuses := []string{}
	for _, p := range *seen {
		if len(statuses) == 0 || statuses[len(statuses)-1] != p.Status {
			statuses = append(statuses, p.Status)
		}
	}
	hex := strings.TrimPrefix(digestOf(gguf), "sha256:")[:12]
	want := []string{"pulling manifest", "pulling " + hex, "verifying sha256 digest"}
	if !reflect.DeepEqual(statuses[:3], want) || statuses[len(statuses)-2] != "writing manifest" || statuses[len(statuses)-1] != "success" {
		t.Errorf("statuses = %q", statuses)
	}
	last := Progress{}
	for _, p := range *seen {
		if p.Digest == digestOf(gguf) && strings.HasPrefix(p.Status, "pulling ") {
			last = p
		}
	}
	if last.Total != int64(len(gguf)) || last.Completed != last.Total {
		t.Errorf("last progress of the model's blob = %+v", last)
	}
	noPartials(t, dir)
	// Only the layers used are kept: the template (in the GGUF file) and the config are not fetched.
	ents, _ := os.ReadDir(filepath.Join(dir, "blobs"))
	if len(ents) != 2 {
		t.Errorf("blobs = %d, want 2 (model, params)", len(ents))
	}
	// Pulling again fetches no blob.
	before := len(h.seenRanges())
	if _, err := Pull(pullCtx(t), "tiny:1b", o); err != nil {
		t.Fatal(err)
	}
	if n := len(h.seenRanges()); n != before {
		t.Errorf("a second pull fetched %d blobs again", n-before)
	}
}

// A private registry named by host and port, over plain HTTP with Insecure.
func TestPullPrivateRegistry(t *testing.T) {
	h := newHub(t)
	h.addModel("team/tiny:v1", testModel(t), nil)
	host := strings.TrimPrefix(h.reg.URL, "http://")
	o, _ := h.opts(t.TempDir(), nil)
	o.Insecure = true
	m, err := Pull(pullCtx(t), host+"/team/tiny:v1", o)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != host+"/team/tiny:v1" || m.Params != nil {
		t.Errorf("model = %+v", m)
	}
}

// A body cut off halfway resumes: the next request asks only for the
// bytes missing.
func TestPullResumesCutBody(t *testing.T) {
	h := newHub(t)
	gguf := testModel(t)
	h.addModel("library/tiny:latest", gguf, nil)
	h.cut[digestOf(gguf)] = 100000
	dir := t.TempDir()
	o, _ := h.opts(dir, nil)
	m, err := Pull(pullCtx(t), "tiny", o)
	if err != nil {
		t.Fatal(err)
	}
	if got := h.seenRanges(); !reflect.DeepEqual(got, []string{"", "bytes=100000-"}) {
		t.Errorf("Range headers = %q", got)
	}
	if got, _ := os.ReadFile(m.Path); !reflect.DeepEqual(got, gguf) {
		t.Error("the resumed file is not the blob")
	}
	noPartials(t, dir)
}

// A body that stops sending is dropped after stallAfter and resumed.
func TestPullResumesStalledBody(t *testing.T) {
	defer func(d time.Duration) { stallAfter = d }(stallAfter)
	stallAfter = 200 * time.Millisecond
	h := newHub(t)
	gguf := testModel(t)
	h.addModel("library/tiny:latest", gguf, nil)
	h.stallAt[digestOf(gguf)] = 50000
	o, _ := h.opts(t.TempDir(), nil)
	if _, err := Pull(pullCtx(t), "tiny", o); err != nil {
		t.Fatal(err)
	}
	if got := h.seenRanges(); !reflect.DeepEqual(got, []string{"", "bytes=50000-"}) {
		t.Errorf("Range headers = %q", got)
	}
}

// Cancelling a pull (Ctrl-C) keeps the partial file; the next pull
// resumes from it.
func TestPullCancelKeepsPartial(t *testing.T) {
	h := newHub(t)
	gguf := testModel(t)
	h.addModel("library/tiny:latest", gguf, nil)
	const half = 120000
	h.stallAt[digestOf(gguf)] = half
	dir := t.TempDir()
	o, _ := h.opts(dir, nil)
	ctx, cancel := context.WithCancel(pullCtx(t))
	o.Progress = func(p Progress) {
		if p.Digest == digestOf(gguf) && p.Completed >= half {
			cancel()
		}
	}
	_, err := Pull(ctx, "tiny", o)
	var intr *Interrupted
	if !errors.As(err, &intr) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want *Interrupted", err)
	}
	partial := blobPath(dir, strings.TrimPrefix(digestOf(gguf), "sha256:")) + "-partial"
	if st, err := os.Stat(partial); err != nil || st.Size() != half || intr.Partial != partial || intr.Have != half {
		t.Fatalf("partial: %v %v (%+v)", st, err, intr)
	}
	if !strings.Contains(err.Error(), "pull again to resume") {
		t.Errorf("message: %v", err)
	}
	if _, ok, _ := Find(dir, "tiny"); ok {
		t.Error("an interrupted pull is listed")
	}
	o, _ = h.opts(dir, nil)
	if _, err := Pull(pullCtx(t), "tiny", o); err != nil {
		t.Fatal(err)
	}
	if got := h.seenRanges(); len(got) != 2 || got[1] != "bytes=120000-" {
		t.Errorf("Range headers = %q", got)
	}
	noPartials(t, dir)
}

// A storage host that ignores Range and sends the whole file (200) is
// written from the start, not appended.
func TestPullRestartsOn200(t *testing.T) {
	h := newHub(t)
	gguf := testModel(t)
	h.addModel("library/tiny:latest", gguf, nil)
	h.cut[digestOf(gguf)] = 70000
	h.ignoreRange = true
	o, _ := h.opts(t.TempDir(), nil)
	m, err := Pull(pullCtx(t), "tiny", o)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(m.Path); !reflect.DeepEqual(got, gguf) {
		t.Error("the file is not the blob")
	}
}

// Bytes that are not the manifest's digest leave no model and no
// partial file, and say so.
func TestPullWrongDigest(t *testing.T) {
	h := newHub(t)
	gguf := testModel(t)
	h.addModel("library/tiny:latest", gguf, nil)
	bad := append([]byte(nil), gguf...)
	bad[len(bad)/2] ^= 1
	h.bodyOverride[digestOf(gguf)] = bad
	dir := t.TempDir()
	o, _ := h.opts(dir, nil)
	_, err := Pull(pullCtx(t), "tiny", o)
	var de *DigestError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "partial file is deleted") {
		t.Fatalf("err = %v", err)
	}
	if ms, _ := List(dir); len(ms) != 0 {
		t.Errorf("listed: %+v", ms)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "blobs"))
	if len(ents) != 0 {
		t.Errorf("blobs left: %v", ents)
	}
}

func TestPullNotFound(t *testing.T) {
	h := newHub(t)
	o, _ := h.opts(t.TempDir(), nil)
	_, err := Pull(pullCtx(t), "nosuch:7b", o)
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "nosuch:7b: not found (404) (manifest unknown)") {
		t.Fatalf("err = %v", err)
	}
}

// 429 is waited out (Retry-After) and tried again; past the tries it is
// one line.
func TestPullRateLimited(t *testing.T) {
	h := newHub(t)
	h.addModel("library/tiny:latest", testModel(t), nil)
	h.limit = 2
	o, _ := h.opts(t.TempDir(), nil)
	if _, err := Pull(pullCtx(t), "tiny", o); err != nil {
		t.Fatal(err)
	}
	if h.manifestN != 3 {
		t.Errorf("manifest requests = %d, want 3", h.manifestN)
	}
	h.manifestN, h.limit = 0, 100
	_, err := Pull(pullCtx(t), "tiny", o)
	var se *StatusError
	if !errors.As(err, &se) || se.Code != http.StatusTooManyRequests || !strings.Contains(err.Error(), "rate limited (429)") {
		t.Fatalf("err = %v", err)
	}
	if h.manifestN != maxTries {
		t.Errorf("tries = %d, want %d", h.manifestN, maxTries)
	}
}

// A Hugging Face repository that wants a token: without HF_TOKEN one
// line says to set it; with it the pull succeeds, and the token goes to
// the Hub only, not to the storage host it redirects to.
func TestPullHFToken(t *testing.T) {
	h := newHub(t)
	h.token = "hf_secret"
	h.addModel("org/Repo-GGUF:Q4_K_M", testModel(t), nil)
	dir := t.TempDir()
	o, _ := h.opts(dir, nil)
	_, err := Pull(pullCtx(t), "hf.co/org/Repo-GGUF:Q4_K_M", o)
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 401 || !strings.Contains(err.Error(), "set HF_TOKEN") {
		t.Fatalf("err = %v", err)
	}
	o, _ = h.opts(dir, map[string]string{"HF_TOKEN": "hf_secret"})
	m, err := Pull(pullCtx(t), "hf.co/org/Repo-GGUF:Q4_K_M", o)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "hf.co/org/Repo-GGUF:Q4_K_M" {
		t.Errorf("name = %q", m.Name)
	}
	for _, a := range h.storeAuth {
		if a != "" {
			t.Errorf("the storage host got Authorization %q", a)
		}
	}
}

// A registry that hands anonymous tokens (WWW-Authenticate: Bearer
// realm=…) is answered with one.
func TestPullAnonymousToken(t *testing.T) {
	h := newHub(t)
	h.addModel("library/tiny:latest", testModel(t), nil)
	h.token = "anon"
	var asked string
	auth := http.NewServeMux()
	auth.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		asked = r.URL.RawQuery
		w.Write([]byte(`{"token":"anon"}`))
	})
	as := newServer(t, auth)
	reg := h.reg.Config.Handler
	h.reg.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="`+as.URL+`/token",service="reg",scope="repository:library/tiny:pull"`)
		reg.ServeHTTP(w, r)
	})
	o, _ := h.opts(t.TempDir(), nil)
	if _, err := Pull(pullCtx(t), "tiny", o); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(asked, "scope=repository%3Alibrary%2Ftiny%3Apull") || !strings.Contains(asked, "service=reg") {
		t.Errorf("token request = %q", asked)
	}
}

// hf.co/ORG/REPO/FILE.gguf: the size and SHA-256 from the LFS headers
// of resolve/main's redirect, the bytes from the storage host.
func TestPullHFFile(t *testing.T) {
	h := newHub(t)
	gguf := testModel(t)
	h.addFile("org/repo/sub/tiny-Q4_0.gguf", gguf)
	dir := t.TempDir()
	o, _ := h.opts(dir, nil)
	m, err := Pull(pullCtx(t), "hf.co/org/repo/sub/tiny-Q4_0.gguf", o)
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "hf.co/org/repo/sub/tiny-Q4_0.gguf" || m.Digest != digestOf(gguf) || m.Size != int64(len(gguf)) {
		t.Errorf("model = %+v", m)
	}
	if _, ok, _ := Find(dir, "huggingface.co/org/repo/sub/tiny-Q4_0.gguf"); !ok {
		t.Error("not found by its long spelling")
	}
	// A file whose LFS digest is not there cannot be verified: refused.
	d := h.addFile("org/repo/plain.gguf", []byte("GGUF not in LFS"))
	h.etag[d] = "0123456789abcdef0123456789abcdef01234567"
	_, err = Pull(pullCtx(t), "hf.co/org/repo/plain.gguf", o)
	if err == nil || !strings.Contains(err.Error(), "no SHA-256") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Pull(pullCtx(t), "hf.co/org/repo/none.gguf", o); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
}

// A pull the disk has no room for is refused before it downloads.
func TestPullChecksDiskSpace(t *testing.T) {
	h := newHub(t)
	m := h.addModel("library/huge:latest", testModel(t), nil)
	m.Layers[0].Size = 1 << 60
	h.manifests["library/huge:latest"] = m
	o, _ := h.opts(t.TempDir(), nil)
	_, err := Pull(pullCtx(t), "huge", o)
	if err == nil || !strings.Contains(err.Error(), "not enough disk space") {
		t.Fatalf("err = %v", err)
	}
	if n := len(h.seenRanges()); n != 0 {
		t.Errorf("%d blob requests", n)
	}
}

// A folder that holds another program's store (ollama's) is not pulled into.
func TestPullRefusesForeignStore(t *testing.T) {
	h := newHub(t)
	h.addModel("library/tiny:latest", testModel(t), nil)
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "manifests"), 0o755)
	o, _ := h.opts(dir, nil)
	if _, err := Pull(pullCtx(t), "tiny", o); err == nil || !strings.Contains(err.Error(), "another program's models") {
		t.Fatalf("err = %v", err)
	}
}

// A body longer than the manifest says is refused, not kept.
func TestPullTooLong(t *testing.T) {
	h := newHub(t)
	m := h.addModel("library/tiny:latest", testModel(t), nil)
	m.Layers[0].Size -= 10
	h.manifests["library/tiny:latest"] = m
	dir := t.TempDir()
	o, _ := h.opts(dir, nil)
	if _, err := Pull(pullCtx(t), "tiny", o); err == nil || !strings.Contains(err.Error(), "tiny:latest: the server sent more bytes than the manifest says") {
		t.Fatalf("err = %v", err)
	}
	if ms, _ := List(dir); len(ms) != 0 {
		t.Errorf("listed: %+v", ms)
	}
}
