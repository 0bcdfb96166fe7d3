package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"dovetail/app/server"
)

// Every refusal is an OpenAI error object with the right status, so that
// OpenAI clients surface the message.
func TestErrors(t *testing.T) {
	o := testOptions()
	o.Ctx = 64
	ts := startWith(t, server.Config{APIKey: "k"}, tinyModel(t), o)
	auth := []string{"Authorization", "Bearer k"}
	long := strings.Repeat("Once upon a time there was a dog. ", 20) // > 64 tokens
	msgs := `"messages":[{"role":"user","content":"Hi"}]`
	const chatURL, complURL = "/v1/chat/completions", "/v1/completions"
	for _, c := range []struct {
		name, method, path, body string
		header                   []string
		status                   int
		param, code, typ         string
	}{
		{"malformed JSON", "POST", chatURL, `{"messages": [`, auth, 400, "", "", "invalid_request_error"},
		{"trailing garbage", "POST", chatURL, `{` + msgs + `} x`, auth, 400, "", "", ""},
		{"empty body", "POST", chatURL, ``, auth, 400, "", "", ""},
		{"not an object", "POST", chatURL, `[1, 2]`, auth, 400, "", "", ""},
		{"temperature as string", "POST", chatURL, `{` + msgs + `,"temperature":"hot"}`, auth, 400, "temperature", "invalid_type", ""},
		{"max_tokens as string", "POST", complURL, `{"prompt":"x","max_tokens":"10"}`, auth, 400, "max_tokens", "invalid_type", ""},
		{"stream as string", "POST", chatURL, `{` + msgs + `,"stream":"yes"}`, auth, 400, "stream", "invalid_type", ""},
		{"messages as string", "POST", chatURL, `{"messages":"Hi"}`, auth, 400, "messages", "invalid_type", ""},
		{"message content as number", "POST", chatURL, `{"messages":[{"role":"user","content":5}]}`, auth, 400, "messages[0].content", "invalid_type", ""},
		{"image content", "POST", chatURL, `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, auth, 400, "messages[0].content", "", ""},
		{"bad role", "POST", chatURL, `{"messages":[{"role":"wizard","content":"Hi"}]}`, auth, 400, "messages[0].role", "", ""},
		{"missing role", "POST", chatURL, `{"messages":[{"content":"Hi"}]}`, auth, 400, "messages[0].role", "", ""},
		{"missing messages", "POST", chatURL, `{"model":"default"}`, auth, 400, "messages", "", ""},
		{"null messages", "POST", chatURL, `{"messages":null}`, auth, 400, "messages", "", ""},
		{"empty messages", "POST", chatURL, `{"messages":[]}`, auth, 400, "messages", "", ""},
		{"missing prompt", "POST", complURL, `{"model":"default"}`, auth, 400, "prompt", "", ""},
		{"prompt as object", "POST", complURL, `{"prompt":{"a":1}}`, auth, 400, "prompt", "invalid_type", ""},
		{"two prompts", "POST", complURL, `{"prompt":["a","b"]}`, auth, 400, "prompt", "", ""},
		{"token out of vocabulary", "POST", complURL, `{"prompt":[1, 999999]}`, auth, 400, "prompt", "", ""},
		{"temperature too high", "POST", chatURL, `{` + msgs + `,"temperature":2.5}`, auth, 400, "temperature", "", ""},
		{"temperature negative", "POST", complURL, `{"prompt":"x","temperature":-0.1}`, auth, 400, "temperature", "", ""},
		{"top_p too high", "POST", chatURL, `{` + msgs + `,"top_p":1.5}`, auth, 400, "top_p", "", ""},
		{"max_tokens zero", "POST", chatURL, `{` + msgs + `,"max_tokens":0}`, auth, 400, "max_tokens", "", ""},
		{"max_completion_tokens negative", "POST", chatURL, `{` + msgs + `,"max_completion_tokens":-5}`, auth, 400, "max_completion_tokens", "", ""},
		{"n=2", "POST", chatURL, `{` + msgs + `,"n":2}`, auth, 400, "n", "", ""},
		{"stop as number", "POST", chatURL, `{` + msgs + `,"stop":5}`, auth, 400, "stop", "invalid_type", ""},
		{"five stops", "POST", chatURL, `{` + msgs + `,"stop":["a","b","c","d","e"]}`, auth, 400, "stop", "", ""},
		{"stream_options without stream", "POST", chatURL, `{` + msgs + `,"stream_options":{"include_usage":true}}`, auth, 400, "stream_options", "", ""},
		{"max_tokens past the context", "POST", chatURL, `{` + msgs + `,"max_tokens":100}`, auth, 400, "max_tokens", "context_length_exceeded", ""},
		{"prompt past the context", "POST", complURL, `{"prompt":"` + long + `"}`, auth, 400, "prompt", "context_length_exceeded", ""},
		{"messages past the context", "POST", chatURL, `{"messages":[{"role":"user","content":"` + long + `"}],"stream":true}`, auth, 400, "messages", "context_length_exceeded", ""},
		{"no key", "POST", chatURL, `{` + msgs + `}`, nil, 401, "", "invalid_api_key", ""},
		{"wrong key", "GET", "/v1/models", ``, []string{"Authorization", "Bearer nope"}, 401, "", "invalid_api_key", ""},
		{"key without Bearer", "GET", "/v1/models", ``, []string{"Authorization", "k"}, 401, "", "invalid_api_key", ""},
		{"unknown model", "POST", chatURL, `{"model":"gpt-4o",` + msgs + `}`, auth, 404, "model", "model_not_found", ""},
		{"unknown model by id", "GET", "/v1/models/gpt-4o", ``, auth, 404, "model", "model_not_found", ""},
		{"GET on chat", "GET", chatURL, ``, auth, 405, "", "method_not_allowed", ""},
		{"POST on models", "POST", "/v1/models", `{}`, auth, 405, "", "method_not_allowed", ""},
		{"DELETE on completions", "DELETE", complURL, ``, auth, 405, "", "method_not_allowed", ""},
		{"unknown path", "POST", "/v1/audio/speech", `{}`, auth, 404, "", "not_found", ""},
		{"unknown path", "GET", "/v2/models", ``, nil, 404, "", "not_found", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, ts.URL+c.path, strings.NewReader(c.body))
			for i := 0; i+1 < len(c.header); i += 2 {
				req.Header.Set(c.header[i], c.header[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Errorf("status %d, want %d", resp.StatusCode, c.status)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var body map[string]map[string]any
			raw, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			unmarshal(t, raw, &body)
			e, ok := body["error"]
			if !ok || len(body) != 1 {
				t.Fatalf("body %s is not {\"error\": ...}", raw)
			}
			for _, k := range []string{"message", "type", "param", "code"} {
				if _, ok := e[k]; !ok {
					t.Errorf("error object lacks %q: %s", k, raw)
				}
			}
			if msg, _ := e["message"].(string); msg == "" {
				t.Errorf("empty message: %s", raw)
			}
			if c.param != "" && e["param"] != c.param {
				t.Errorf("param %v, want %q (%s)", e["param"], c.param, e["message"])
			}
			if c.code != "" && e["code"] != c.code {
				t.Errorf("code %v, want %q (%s)", e["code"], c.code, e["message"])
			}
			if c.typ != "" && e["type"] != c.typ {
				t.Errorf("type %v, want %q", e["type"], c.typ)
			}
		})
	}

	// What needs no key (/health alone), and what the key opens.
	for _, c := range []struct {
		method, path, body string
		header             []string
	}{
		{"GET", "/health", "", nil},
		{"GET", "/metrics", "", auth},
		{"GET", "/v1/models", "", auth},
		{"GET", "/v1/models/default", "", auth},
		{"POST", complURL, `{"prompt":"Hi","max_tokens":2,"model":"tinystories656K-Q8_0"}`, auth},
		{"POST", chatURL, `{"model":"tinystories656K-Q8_0.gguf",` + msgs + `,"max_tokens":2,"top_p":0}`, auth},
	} {
		if code, body := do(t, c.method, ts.URL+c.path, c.body, c.header...); code != 200 {
			t.Errorf("%s %s: %d %s", c.method, c.path, code, body)
		}
	}
}
