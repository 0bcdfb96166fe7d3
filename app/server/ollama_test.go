package server_test

import (
	"context"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ollama/ollama/api"

	"dovetail/app/runner"
	"dovetail/app/runner/discover"
	"dovetail/app/server"
	"dovetail/internal/golden"
)

// ollamaClient is ollama's official Go client for a test server.
func ollamaClient(t *testing.T, ts *testServer) *api.Client {
	t.Helper()
	u, err := url.Parse(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(u, http.DefaultClient)
}

// ollama's own client lists, shows, chats and generates, streaming and
// not; the text is what OpenAI's API (and dovetail run) gives for the same
// prompt. The list names the model with a tag, as ollama's clients expect,
// and that name, the file's and the name without a tag all find it.
func TestOllamaClient(t *testing.T) {
	ts := start(t, server.Config{})
	c := ollamaClient(t, ts)
	ctx := context.Background()
	if err := c.Heartbeat(ctx); err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
	if v, err := c.Version(ctx); err != nil || v == "" {
		t.Errorf("version %q, %v", v, err)
	}
	list, err := c.List(ctx)
	if err != nil || len(list.Models) != 1 || list.Models[0].Name != "tinystories656K-Q8_0:latest" || list.Models[0].Model != list.Models[0].Name ||
		list.Models[0].Details.Format != "gguf" || list.Models[0].Details.Family != "llama" || list.Models[0].Details.QuantizationLevel != "Q8_0" {
		t.Fatalf("list %+v, %v", list, err)
	}
	show, err := c.Show(ctx, &api.ShowRequest{Model: list.Models[0].Name})
	if err != nil || show.Details.ParameterSize == "" || show.ModelInfo["llama.context_length"] == nil {
		t.Fatalf("show %+v, %v", show, err)
	}

	want := cliRun(t, prompt, 24)
	opts := map[string]any{"temperature": 0, "num_predict": 24, "repeat_penalty": 1}
	for _, stream := range []bool{false, true} {
		var text strings.Builder
		var last api.GenerateResponse
		err := c.Generate(ctx, &api.GenerateRequest{Model: "tinystories656K-Q8_0.gguf", Prompt: prompt, Raw: true, Stream: &stream, Options: opts},
			func(r api.GenerateResponse) error { text.WriteString(r.Response); last = r; return nil })
		if err != nil {
			t.Fatalf("generate (stream %v): %v", stream, err)
		}
		if text.String() != want || !last.Done || last.DoneReason != "length" || last.EvalCount != 24 || last.PromptEvalCount == 0 ||
			last.EvalDuration <= 0 || len(last.Context) != last.PromptEvalCount+24 {
			t.Errorf("generate (stream %v): %q, done %+v; want %q", stream, text.String(), last, want)
		}

		text.Reset()
		var lastChat api.ChatResponse
		chunks := 0
		err = c.Chat(ctx, &api.ChatRequest{Model: list.Models[0].Name, Stream: &stream, Options: opts,
			Messages: []api.Message{{Role: "user", Content: prompt}}},
			func(r api.ChatResponse) error {
				text.WriteString(r.Message.Content)
				lastChat = r
				chunks++
				return nil
			})
		if err != nil {
			t.Fatalf("chat (stream %v): %v", stream, err)
		}
		if text.String() != want || !lastChat.Done || lastChat.Message.Role != "assistant" || lastChat.EvalCount != 24 ||
			lastChat.Model != list.Models[0].Name {
			t.Errorf("chat (stream %v): %q, done %+v; want %q", stream, text.String(), lastChat, want)
		}
		if stream && chunks < 3 || !stream && chunks != 1 {
			t.Errorf("chat (stream %v): %d objects", stream, chunks)
		}
	}
	ps, err := c.ListRunning(ctx)
	if err != nil || len(ps.Models) != 1 || ps.Models[0].Name != list.Models[0].Name || ps.Models[0].Size == 0 || ps.Models[0].ContextLength != 512 {
		t.Errorf("ps %+v, %v", ps, err)
	}
}

// What ollama's API is asked and cannot do is refused by name.
func TestOllamaRefuses(t *testing.T) {
	ts := start(t, server.Config{})
	for _, c := range []struct{ path, body, want string }{
		{"/api/chat", `{"model":"nosuch","messages":[{"role":"user","content":"x"}]}`, "does not exist"},
		{"/api/chat", `{"model":"default","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]}`, "'tools'"},
		{"/api/chat", `{"model":"default","messages":[{"role":"user","content":"x"}],"format":"json"}`, "'format'"},
		{"/api/chat", `{"model":"default","messages":[{"role":"user","content":"x","images":["aGk="]}]}`, "images"},
		{"/api/generate", `{"model":"default","prompt":"x","suffix":"y"}`, "'suffix'"},
		{"/api/generate", `{"model":"default","prompt":"x","options":{"mirostat":3}}`, "options.mirostat"},
		{"/api/generate", `{"model":"default","prompt":"x","options":{"nonsense":1}}`, "options.nonsense"},
		{"/api/generate", `{"model":"default","prompt":"x","options":{"temperature":"hot"}}`, "options.temperature"},
		{"/api/generate", `{"model":"default","prompt":"x","options":{"num_ctx":100000}}`, "num_ctx"},
		{"/api/show", `{"model":"nosuch"}`, "does not exist"},
	} {
		code, body := post(t, ts.URL+c.path, c.body)
		if code < 400 || code >= 500 || !strings.Contains(string(body), `"error"`) || !strings.Contains(string(body), c.want) {
			t.Errorf("%s %s: %d %s", c.path, c.body, code, body)
		}
	}
	// Options that say only how ollama would run the model are taken.
	if code, body := post(t, ts.URL+"/api/generate", `{"model":"default","prompt":"x","stream":false,"options":{"num_thread":4,"num_gpu":99,"num_predict":2}}`); code != 200 {
		t.Errorf("runner options: %d %s", code, body)
	}
}

// fleetServer serves two models by name, at most one loaded at a time.
func fleetServer(t *testing.T, keepAlive time.Duration) *testServer {
	t.Helper()
	entries := []discover.Model{
		{Name: "stories260K", Path: golden.ModelPath("stories260K-f32.gguf")},
		{Name: "tinystories656K", Path: golden.ModelPath("tinystories656K-f32.gguf")},
	}
	var srv *server.Server
	fleet, err := runner.NewFleet(entries, runner.FleetOptions{MaxLoaded: 1, KeepAlive: keepAlive,
		OnUnload: func(r *runner.Runner) { srv.Forget(r) },
		Options:  func(*runner.Model) (runner.Options, error) { return testOptions(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fleet.Close) // after the server stops: cleanups run last first
	ts := startFleet(t, server.Config{Models: fleet, Queue: 64})
	srv = ts.srv
	return ts
}

// Requests name either of two models under load: each is answered by the
// model it named (the two write different text), one model
// loaded at a time; once idle past the keep-alive the model unloads and
// its memory returns.
func TestModelsByName(t *testing.T) {
	baseline := heapInUse()
	ts := fleetServer(t, 50*time.Millisecond)
	c := ollamaClient(t, ts)
	ctx := context.Background()
	list, err := c.List(ctx)
	if err != nil || len(list.Models) != 2 {
		t.Fatalf("list %+v, %v", list, err)
	}
	generate := func(model string) string {
		f := false
		var out string
		err := c.Generate(ctx, &api.GenerateRequest{Model: model, Prompt: "Once upon a time", Raw: true, Stream: &f,
			Options: map[string]any{"temperature": 0, "num_predict": 20, "repeat_penalty": 1}},
			func(r api.GenerateResponse) error { out += r.Response; return nil })
		if err != nil {
			t.Errorf("%s: %v", model, err)
		}
		return out
	}
	want := map[string]string{"stories260K": generate("stories260K"), "tinystories656K": generate("tinystories656K")}
	if want["stories260K"] == want["tinystories656K"] {
		t.Fatalf("the two models wrote the same text %q: the test cannot tell them apart", want["stories260K"])
	}
	var wg sync.WaitGroup
	for i := range 24 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := []string{"stories260K", "tinystories656K"}[i%2]
			if got := generate(name); got != want[name] {
				t.Errorf("request %d for %s was answered %q, want %q", i, name, got, want[name])
			}
			if ps, err := c.ListRunning(ctx); err != nil || len(ps.Models) > 1 {
				t.Errorf("%d models loaded at once (%v)", len(ps.Models), err)
			}
		}()
	}
	wg.Wait()
	eventually(t, 5*time.Second, "the idle model unloaded", func() bool {
		ps, err := c.ListRunning(ctx)
		return err == nil && len(ps.Models) == 0
	})
	if grew := int64(heapInUse()) - int64(baseline); grew > 4<<20 {
		t.Errorf("the heap grew by %d bytes once both models were unloaded", grew)
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}
