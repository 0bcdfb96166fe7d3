package server_test

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"

	"dovetail/app/runner"
	"dovetail/app/runner/discover"
	"dovetail/app/runner/pull"
	"dovetail/app/server"
	"dovetail/internal/golden"
	"dovetail/internal/registrytest"
)

// pullServer is a server of a fleet that holds one of ollama's models
// (the test model, as ollama's store would list it), pulling from a
// local registry that has "tiny:1b" into a folder of the test's own.
type pullServer struct {
	*testServer
	reg    *registrytest.Registry
	dir    string // the models folder
	digest string // tiny:1b's weights
	other  discover.Model
}

func startPulls(t *testing.T, params map[string]any) *pullServer {
	t.Helper()
	gguf, err := os.ReadFile(golden.ModelPath("stories260K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	p := &pullServer{reg: registrytest.New(t), dir: t.TempDir(),
		other: discover.Model{Name: "other:latest", Path: golden.ModelPath("stories260K-f32.gguf"), Source: "ollama"}}
	p.digest = p.reg.Add("library/tiny:1b", gguf, params)
	var srv *server.Server
	fleet, err := runner.NewFleet([]discover.Model{p.other}, runner.FleetOptions{
		Options:  func(*runner.Model) (runner.Options, error) { return testOptions(), nil },
		OnUnload: func(r *runner.Runner) { srv.Forget(r) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fleet.Close)
	p.testServer = startFleet(t, server.Config{Models: fleet, Pulls: pull.Options{Dir: p.dir, Env: p.reg.Env}})
	srv = p.srv
	return p
}

// ndjsonLines parses a stream body's objects, each as a map and as sent.
func ndjsonLines(t *testing.T, body []byte) ([]map[string]any, []string) {
	t.Helper()
	var objs []map[string]any
	var raw []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		var m map[string]any
		unmarshal(t, sc.Bytes(), &m)
		objs, raw = append(objs, m), append(raw, sc.Text())
	}
	return objs, raw
}

// tagged lists /api/tags's names.
func tagged(t *testing.T, base string) []string {
	t.Helper()
	_, body := do(t, http.MethodGet, base+"/api/tags", "")
	var tags struct {
		Models []struct {
			Name    string `json:"name"`
			Details struct {
				QuantizationLevel string `json:"quantization_level"`
			} `json:"details"`
		} `json:"models"`
	}
	unmarshal(t, body, &tags)
	var names []string
	for _, m := range tags.Models {
		names = append(names, m.Name)
	}
	return names
}

func has(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// /api/pull streams ollama's progress objects: the manifest, the blob's
// bytes with its digest, the check, the manifest written, then success;
// the model is listed, and runs, once success is read.
func TestOllamaPullStreams(t *testing.T) {
	p := startPulls(t, nil)
	resp, err := http.Post(p.URL+"/api/pull", "application/json", strings.NewReader(`{"model":"tiny:1b"}`))
	if err != nil {
		t.Fatal(err)
	}
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("status %d, %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	objs, raw := ndjsonLines(t, body.Bytes())
	n := len(raw)
	if n < 5 || raw[0] != `{"status":"pulling manifest"}` || raw[n-3] != `{"status":"verifying sha256 digest"}` ||
		raw[n-2] != `{"status":"writing manifest"}` || raw[n-1] != `{"status":"success"}` {
		t.Fatalf("stream:\n%s", body.String())
	}
	blob := false
	for _, o := range objs[1 : n-3] {
		if o["status"] == "pulling "+strings.TrimPrefix(p.digest, "sha256:")[:12] && o["digest"] == p.digest {
			blob = true
			if total, done := o["total"].(float64), o["completed"]; total <= 0 || done != nil && done.(float64) > total {
				t.Errorf("progress %v", o)
			}
		}
	}
	if !blob {
		t.Errorf("no progress of blob %s:\n%s", p.digest, body.String())
	}
	if names := tagged(t, p.URL); !has(names, "tiny:1b") {
		t.Fatalf("/api/tags after the pull: %q", names)
	}
	code, out := post(t, p.URL+"/api/generate", `{"model":"tiny:1b","prompt":"Once","stream":false,"options":{"num_predict":2}}`)
	if code != 200 {
		t.Errorf("generating with the pulled model: %d %s", code, out)
	}
}

// stream false answers one {"status":"success"}; a name the registry
// does not have is an error object (in the stream, or a 404), a name that
// is none a 400, and nothing is listed.
func TestOllamaPullErrors(t *testing.T) {
	p := startPulls(t, nil)
	code, body := post(t, p.URL+"/api/pull", `{"name":"tiny:1b","stream":false}`)
	if code != 200 || strings.TrimSpace(string(body)) != `{"status":"success"}` {
		t.Errorf("stream false: %d %s", code, body)
	}
	code, body = post(t, p.URL+"/api/pull", `{"model":"nothing:here"}`)
	objs, _ := ndjsonLines(t, body)
	if code != 200 || len(objs) == 0 || objs[len(objs)-1]["error"] == nil {
		t.Errorf("a missing model, streamed: %d %s", code, body)
	}
	code, body = post(t, p.URL+"/api/pull", `{"model":"nothing:here","stream":false}`)
	var e struct{ Error string }
	unmarshal(t, body, &e)
	if code != 404 || e.Error == "" {
		t.Errorf("a missing model: %d %s", code, body)
	}
	for _, bad := range []string{`{}`, `{"model":"a b c"}`, `{"model":5}`, ``} {
		code, body := post(t, p.URL+"/api/pull", bad)
		unmarshal(t, body, &e)
		if code != 400 || e.Error == "" {
			t.Errorf("%s: %d %s", bad, code, body)
		}
	}
	if names := tagged(t, p.URL); has(names, "nothing:here") || len(names) != 2 {
		t.Errorf("/api/tags: %q", names)
	}
}

// ollama's Go client pulls with its progress callback, deletes and
// copies; delete and copy touch only pulled models, and delete unloads a
// loaded one first.
func TestOllamaClientPullDeleteCopy(t *testing.T) {
	p := startPulls(t, nil)
	c := ollamaClient(t, p.testServer)
	ctx := context.Background()
	var statuses []string
	var total, completed int64
	err := c.Pull(ctx, &api.PullRequest{Model: "tiny:1b"}, func(r api.ProgressResponse) error {
		statuses = append(statuses, r.Status)
		if r.Digest == p.digest {
			total, completed = max(total, r.Total), max(completed, r.Completed)
		}
		return nil
	})
	if err != nil || len(statuses) == 0 || statuses[len(statuses)-1] != "success" || total == 0 || completed != total {
		t.Fatalf("pull: %v, %q, %d of %d", err, statuses, completed, total)
	}
	if err := c.Copy(ctx, &api.CopyRequest{Source: "tiny:1b", Destination: "mine"}); err != nil {
		t.Fatalf("copy: %v", err)
	}
	if names := tagged(t, p.URL); !has(names, "tiny:1b") || !has(names, "mine:latest") {
		t.Fatalf("after the copy: %q", names)
	}
	for _, bad := range []*api.CopyRequest{{Source: "gone", Destination: "x"}, {Source: "other", Destination: "x"}, {Source: "tiny:1b"}} {
		if err := c.Copy(ctx, bad); err == nil {
			t.Errorf("copy %+v: no error", bad)
		}
	}

	// Loaded, then deleted: it unloads, and is found no more.
	if code, body := post(t, p.URL+"/api/generate", `{"model":"mine","prompt":"Once","stream":false,"options":{"num_predict":1}}`); code != 200 {
		t.Fatalf("generate: %d %s", code, body)
	}
	if err := c.Delete(ctx, &api.DeleteRequest{Model: "mine"}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	ps, err := c.ListRunning(ctx)
	if err != nil || len(ps.Models) != 0 {
		t.Errorf("running after the delete: %+v, %v", ps, err)
	}
	if names := tagged(t, p.URL); has(names, "mine:latest") || !has(names, "tiny:1b") {
		t.Errorf("after the delete: %q", names)
	}
	if ms, _ := pull.List(p.dir); len(ms) != 1 {
		t.Errorf("pulled models left: %+v", ms)
	}

	// Another program's model is not Dovetail's to delete.
	code, body := do(t, http.MethodDelete, p.URL+"/api/delete", `{"model":"other"}`)
	if code != 404 || !strings.Contains(string(body), "not pulled by Dovetail") {
		t.Errorf("deleting ollama's model: %d %s", code, body)
	}
	if _, err := os.Stat(p.other.Path); err != nil {
		t.Fatalf("ollama's model's file: %v", err)
	}
	for _, c := range []struct{ method, body string }{{http.MethodDelete, `{"model":"mine"}`}, {http.MethodDelete, `{}`}, {http.MethodPost, `{"model":"tiny:1b"}`}} {
		code, body := do(t, c.method, p.URL+"/api/delete", c.body)
		if code < 400 || code == 500 {
			t.Errorf("%s %s: %d %s", c.method, c.body, code, body)
		}
	}
}

// A pulled model's params are its defaults: num_predict from its
// manifest holds where a request gives none, and a request's own wins.
func TestOllamaPulledParams(t *testing.T) {
	p := startPulls(t, map[string]any{"num_predict": 3, "temperature": 0})
	if code, body := post(t, p.URL+"/api/pull", `{"model":"tiny:1b","stream":false}`); code != 200 {
		t.Fatalf("pull: %d %s", code, body)
	}
	for _, c := range []struct {
		options string
		want    float64
	}{{`{}`, 3}, {`{"num_predict":5}`, 5}} {
		code, body := post(t, p.URL+"/api/generate", `{"model":"tiny:1b","prompt":"Once upon a time","stream":false,"options":`+c.options+`}`)
		var r struct {
			EvalCount float64 `json:"eval_count"`
		}
		unmarshal(t, body, &r)
		if code != 200 || r.EvalCount != c.want {
			t.Errorf("options %s: %d, %v tokens, want %v", c.options, code, r.EvalCount, c.want)
		}
	}
}

// A page of another origin cannot make the server download: the gate
// refuses it before the registry is asked.
func TestOllamaPullGate(t *testing.T) {
	p := startPulls(t, nil)
	code, _ := post(t, p.URL+"/api/pull", `{"model":"tiny:1b"}`, "Origin", "https://evil.example")
	if code != http.StatusForbidden || len(p.reg.Ranges()) != 0 {
		t.Errorf("status %d, blob requests %q", code, p.reg.Ranges())
	}
	if ms, _ := pull.List(p.dir); len(ms) != 0 {
		t.Errorf("pulled: %+v", ms)
	}
}

// A server of one pulled model (serve -m NAME) does not delete the model
// it runs; pulling another keeps it on disk for the next start.
func TestOllamaDeleteRunningModel(t *testing.T) {
	gguf, err := os.ReadFile(golden.ModelPath("stories260K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	reg := registrytest.New(t)
	reg.Add("library/tiny:1b", gguf, nil)
	reg.Add("library/tiny:2b", gguf[:len(gguf):len(gguf)], map[string]any{"top_k": 5})
	dir := t.TempDir()
	o := pull.Options{Dir: dir, Env: reg.Env}
	pm, err := pull.Pull(context.Background(), "tiny:1b", o)
	if err != nil {
		t.Fatal(err)
	}
	m, err := runner.OpenModel(pm.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ts := startWith(t, server.Config{Pulls: o}, m, testOptions())
	code, body := do(t, http.MethodDelete, ts.URL+"/api/delete", `{"model":"tiny:1b"}`)
	if code != http.StatusConflict || !strings.Contains(string(body), "this server runs") {
		t.Errorf("deleting the model served: %d %s", code, body)
	}
	if _, ok, _ := pull.Find(dir, "tiny:1b"); !ok {
		t.Error("the model served was deleted")
	}
	if code, body := post(t, ts.URL+"/api/pull", `{"model":"tiny:2b","stream":false}`); code != 200 {
		t.Errorf("pull: %d %s", code, body)
	}
	if _, ok, _ := pull.Find(dir, "tiny:2b"); !ok {
		t.Error("the model pulled is not kept")
	}
}
