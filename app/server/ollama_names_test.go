package server_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"dovetail/app/runner"
	"dovetail/app/runner/discover"
	"dovetail/app/server"
	"dovetail/internal/golden"
	"dovetail/models/draft"
	"dovetail/models/gguf"
)

// A model found on disk answers to the names ollama's clients use: the
// tagged name /api/tags lists, the name without a tag, the file's base
// name with and without .gguf; another tag is a 404.
func TestOllamaNames(t *testing.T) {
	ts := fleetServer(t, time.Minute)
	c := ollamaClient(t, ts)
	list, err := c.List(context.Background())
	if err != nil || len(list.Models) != 2 || list.Models[0].Name != "stories260K:latest" || list.Models[1].Model != "tinystories656K:latest" {
		t.Fatalf("list %+v, %v", list, err)
	}
	for _, name := range []string{"stories260K:latest", "stories260K", "STORIES260K:Latest", "stories260K.gguf", "library/stories260K:latest"} {
		code, body := post(t, ts.URL+"/api/generate", `{"model":"`+name+`","prompt":"Once","stream":false,"options":{"num_predict":2}}`)
		if code != 200 || !strings.Contains(string(body), `"model":"stories260K:latest"`) {
			t.Errorf("%s: %d %s", name, code, body)
		}
		if code, body := post(t, ts.URL+"/v1/completions", `{"model":"`+name+`","prompt":"Once","max_tokens":2}`); code != 200 {
			t.Errorf("/v1 %s: %d %s", name, code, body)
		}
	}
	code, body := post(t, ts.URL+"/api/chat", `{"model":"stories260K:q8","messages":[{"role":"user","content":"x"}]}`)
	if code != 404 || !strings.Contains(string(body), "stories260K:q8") {
		t.Errorf("another tag: %d %s", code, body)
	}
}

// A draft checkpoint beside the models is no model: /api/tags and
// /v1/models leave it out, and a request naming it is a 404 naming it,
// never a 500.
func TestDraftsNotListed(t *testing.T) {
	dir := t.TempDir()
	w := gguf.NewWriter()
	w.Set("general.architecture", draft.Arch)
	if err := w.WriteFile(filepath.Join(dir, "0123abcd.gguf")); err != nil {
		t.Fatal(err)
	}
	model, err := os.ReadFile(golden.ModelPath("stories260K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stories260K-f32.gguf"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	found, err := discover.Find(discover.Places{Paths: []string{dir}})
	if err != nil {
		t.Fatal(err)
	}
	fleet, err := runner.NewFleet(found, runner.FleetOptions{Options: func(*runner.Model) (runner.Options, error) { return testOptions(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fleet.Close)
	ts := startFleet(t, server.Config{Models: fleet})
	for _, path := range []string{"/api/tags", "/v1/models"} {
		code, body := do(t, http.MethodGet, ts.URL+path, "")
		if code != 200 || strings.Contains(string(body), "0123abcd") || !strings.Contains(string(body), "stories260K-f32") {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
	for _, name := range []string{"0123abcd.gguf", "0123abcd"} {
		for path, body := range map[string]string{
			"/api/generate":        `{"model":"` + name + `","prompt":"x"}`,
			"/api/show":            `{"model":"` + name + `"}`,
			"/v1/chat/completions": `{"model":"` + name + `","messages":[{"role":"user","content":"x"}]}`,
		} {
			if code, b := post(t, ts.URL+path, body); code != 404 || !strings.Contains(string(b), name) {
				t.Errorf("%s %s: %d %s", path, name, code, b)
			}
		}
	}
}

// keep_alive 0 with nothing to generate unloads the model named, as
// ollama does ("done_reason": "unload"): a model that is not loaded is
// not loaded for it, and the one that is stays loaded.
func TestKeepAliveZeroNeverLoads(t *testing.T) {
	ts := fleetServer(t, time.Minute)
	c := ollamaClient(t, ts)
	ctx := context.Background()
	loaded := func() []string {
		ps, err := c.ListRunning(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range ps.Models {
			names = append(names, m.Name)
		}
		return names
	}
	if code, body := post(t, ts.URL+"/api/generate", `{"model":"stories260K"}`); code != 200 {
		t.Fatalf("load: %d %s", code, body)
	}
	for _, req := range []struct{ path, body string }{
		{"/api/generate", `{"model":"tinystories656K","keep_alive":0}`},
		{"/api/chat", `{"model":"tinystories656K:latest","messages":[],"keep_alive":"0s"}`},
	} {
		code, body := post(t, ts.URL+req.path, req.body)
		var r struct {
			DoneReason string `json:"done_reason"`
			Done       bool
		}
		unmarshal(t, body, &r)
		if code != 200 || !r.Done || r.DoneReason != "unload" {
			t.Errorf("%s %s: %d %s", req.path, req.body, code, body)
		}
		if got := loaded(); len(got) != 1 || got[0] != "stories260K:latest" {
			t.Errorf("after %s %s: loaded %v, want stories260K:latest alone", req.path, req.body, got)
		}
	}
	if code, body := post(t, ts.URL+"/api/embed", `{"model":"tinystories656K","input":[],"keep_alive":0}`); code != 200 || !strings.Contains(string(body), `"embeddings":[]`) {
		t.Errorf("/api/embed with no input, keep_alive 0: %d %s", code, body)
	}
	if got := loaded(); len(got) != 1 || got[0] != "stories260K:latest" {
		t.Errorf("after /api/embed with keep_alive 0: loaded %v, want stories260K:latest alone", got)
	}
	if code, body := post(t, ts.URL+"/api/chat", `{"model":"stories260K","messages":[],"keep_alive":0}`); code != 200 || !strings.Contains(string(body), `"unload"`) {
		t.Errorf("unload the loaded model: %d %s", code, body)
	}
	if got := loaded(); len(got) != 0 {
		t.Errorf("after unloading it: loaded %v", got)
	}
	if code, body := post(t, ts.URL+"/api/generate", `{"model":"nosuch","keep_alive":0}`); code != 404 {
		t.Errorf("unload an unknown model: %d %s", code, body)
	}
}

// Routes ollama's API does not have, and wrong methods on those it has,
// answer in ollama's shape, {"error": "…"}, with 404 or 405; OpenAI's
// routes keep OpenAI's shape.
func TestOllamaUnknownRoutes(t *testing.T) {
	ts := start(t, server.Config{})
	for _, req := range []struct {
		method, path string
		status       int
	}{
		{"POST", "/api/push", 404},
		{"GET", "/api/nothing/here", 404},
		{"GET", "/api/chat", 405},
		{"DELETE", "/api/tags", 405},
		{"POST", "/api/version", 405},
	} {
		code, body, h := send(t, ts.URL, request{req.method, req.path, `{}`, "", nil})
		if code != req.status {
			t.Errorf("%s %s: %d, want %d", req.method, req.path, code, req.status)
		}
		if req.status == 405 && h.Get("Allow") == "" {
			t.Errorf("%s %s: no Allow header", req.method, req.path)
		}
		errorShape(t, req.path, body, req.path)
	}
	// What ollama's client shows for one: the message, not [object Object].
	err := ollamaClient(t, ts).Push(context.Background(), &api.PushRequest{Model: "llama3"}, func(api.ProgressResponse) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "/api/push") {
		t.Errorf("push: %v", err)
	}
	code, body, _ := send(t, ts.URL, request{"GET", "/v1/nothing", "", "", nil})
	if code != 404 {
		t.Errorf("/v1/nothing: %d", code)
	}
	errorShape(t, "/v1/nothing", body, "/v1/nothing")
}
