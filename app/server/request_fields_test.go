package server_test

import (
	"strings"
	"testing"

	"dovetail/app/server"
)

// A fraction where a count is expected is a 400 that names the field and
// says it wants an integer, in both APIs (ollama itself would truncate
// num_predict 3.7 to 3 without a word).
func TestIntegerFields(t *testing.T) {
	ts := start(t, server.Config{})
	msgs := `"messages":[{"role":"user","content":"Hi"}]`
	for _, c := range []struct{ path, body, field string }{
		{"/v1/chat/completions", `{` + msgs + `,"max_tokens":3.7}`, "max_tokens"},
		{"/v1/chat/completions", `{` + msgs + `,"max_completion_tokens":2.5}`, "max_completion_tokens"},
		{"/v1/chat/completions", `{` + msgs + `,"n":1.5}`, "n"},
		{"/v1/chat/completions", `{` + msgs + `,"seed":2.5}`, "seed"},
		{"/v1/chat/completions", `{` + msgs + `,"logprobs":true,"top_logprobs":1.5}`, "top_logprobs"},
		{"/v1/completions", `{"prompt":"Hi","max_tokens":3.7}`, "max_tokens"},
		{"/api/generate", `{"model":"default","prompt":"Hi","options":{"num_predict":3.7}}`, "options.num_predict"},
		{"/api/generate", `{"model":"default","prompt":"Hi","options":{"top_k":2.5}}`, "options.top_k"},
		{"/api/chat", `{"model":"default",` + msgs + `,"options":{"seed":1.5}}`, "options.seed"},
		{"/api/chat", `{"model":"default",` + msgs + `,"options":{"num_ctx":100.5}}`, "options.num_ctx"},
	} {
		code, body := post(t, ts.URL+c.path, c.body)
		if code != 400 || !strings.Contains(string(body), c.field) || !strings.Contains(string(body), "an integer") {
			t.Errorf("%s %s: %d %s", c.path, c.body, code, body)
		}
	}
	// A whole number written as a float is a number ollama's options take.
	if code, body := post(t, ts.URL+"/api/generate", `{"model":"default","prompt":"Hi","stream":false,"options":{"num_predict":2.0}}`); code != 200 {
		t.Errorf("num_predict 2.0: %d %s", code, body)
	}
}

// web_search_options asks for a web search by being there (OpenAI's API
// searches with {}): there is none here, so it is a 400 naming the field;
// null is taken.
func TestWebSearchOptionsRefused(t *testing.T) {
	ts := start(t, server.Config{})
	msgs := `"messages":[{"role":"user","content":"Hi"}],"max_tokens":2`
	for _, v := range []string{`{}`, `{"search_context_size":"low"}`} {
		code, body := post(t, ts.URL+"/v1/chat/completions", `{`+msgs+`,"web_search_options":`+v+`}`)
		if code != 400 || !strings.Contains(string(body), `"param":"web_search_options"`) {
			t.Errorf("web_search_options %s: %d %s", v, code, body)
		}
	}
	if code, body := post(t, ts.URL+"/v1/chat/completions", `{`+msgs+`,"web_search_options":null}`); code != 200 {
		t.Errorf("web_search_options null: %d %s", code, body)
	}
}

// The options ollama itself takes and ignores (how it would run the model:
// threads, GPUs, batch, memory mapping; options of older versions) are
// taken here too: they change no text.
func TestOllamaIgnoredOptions(t *testing.T) {
	ts := start(t, server.Config{})
	opts := `"numa":true,"num_batch":8,"num_gpu":99,"main_gpu":0,"use_mmap":true,"use_mlock":false,"num_thread":2,` +
		`"low_vram":false,"f16_kv":true,"vocab_only":false,"logits_all":false,"num_keep":4,"num_predict":2`
	for _, path := range []string{"/api/generate", "/api/chat"} {
		body := `{"model":"default","prompt":"Hi","messages":[{"role":"user","content":"Hi"}],"stream":false,"options":{` + opts + `}}`
		if code, b := post(t, ts.URL+path, body); code != 200 {
			t.Errorf("%s: %d %s", path, code, b)
		}
	}
}
