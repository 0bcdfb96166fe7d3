package server_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"dovetail/app/runner"
	"dovetail/app/server"
	"dovetail/engine"
	"dovetail/models/chat"
)

// A browser's preflight from a page on this machine (http or https, as
// ollama allows) is answered, and the answer names the page's origin;
// another origin is not, unless asked for.
func TestCORS(t *testing.T) {
	ts := start(t, server.Config{})
	preflight := func(url, origin string) *http.Response {
		req, _ := http.NewRequest(http.MethodOptions, url+"/v1/chat/completions", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "POST")
		req.Header.Set("Access-Control-Request-Headers", "authorization, content-type, x-stainless-os")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for _, origin := range []string{"http://localhost:5173", "http://127.0.0.1:8080", "http://LOCALHOST:3000", "https://localhost:5173"} {
		r := preflight(ts.URL, origin)
		if r.StatusCode != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Origin") != origin ||
			!strings.Contains(r.Header.Get("Access-Control-Allow-Methods"), "POST") ||
			!strings.Contains(r.Header.Get("Access-Control-Allow-Headers"), "x-stainless-os") {
			t.Errorf("preflight from %s: %d %v", origin, r.StatusCode, r.Header)
		}
	}
	for _, origin := range []string{"https://evil.example", "http://localhost.evil.example:80", "null"} {
		if r := preflight(ts.URL, origin); r.StatusCode != http.StatusForbidden || r.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight from %s: %d %v", origin, r.StatusCode, r.Header)
		}
	}
	// The request itself carries the header for the page to read it.
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/v1/models", nil)
	req.Header.Set("Origin", "http://localhost:5173")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Access-Control-Allow-Origin") != "http://localhost:5173" {
		t.Errorf("GET from a local page: %v", resp.Header)
	}
	// Every origin, when asked for.
	any := startWith(t, server.Config{CORSOrigins: []string{"*"}}, tinyModel(t), testOptions())
	if r := preflight(any.URL, "https://app.example"); r.StatusCode != http.StatusNoContent || r.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("with *: %d %v", r.StatusCode, r.Header)
	}
	r, err := runner.New(tinyModel(t), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := server.New(server.Config{Runner: r, CORSOrigins: []string{"localhost"}}); err == nil {
		t.Error("an origin without a scheme was taken")
	}
}

// OpenAI's fields that Dovetail does not implement are refused with a 400
// naming the field; their defaults, as clients send them, are taken.
func TestUnsupportedFieldsRefused(t *testing.T) {
	ts := start(t, server.Config{})
	chat := `"messages":[{"role":"user","content":"Hi"}],"max_tokens":2`
	for _, c := range []struct{ path, fields, param string }{
		{"/v1/chat/completions", `"tools":[{"type":"function","function":{"name":"f"}}]`, "tools"},
		{"/v1/chat/completions", `"tool_choice":"required"`, "tool_choice"},
		{"/v1/chat/completions", `"functions":[{"name":"f"}]`, "functions"},
		{"/v1/chat/completions", `"response_format":{"type":"json_object"}`, "response_format"},
		{"/v1/chat/completions", `"logit_bias":{"50":5}`, "logit_bias"},
		{"/v1/chat/completions", `"frequency_penalty":2.5`, "frequency_penalty"},
		{"/v1/chat/completions", `"presence_penalty":-3`, "presence_penalty"},
		{"/v1/chat/completions", `"n":2`, "n"},
		{"/v1/chat/completions", `"modalities":["text","audio"]`, "modalities"},
		{"/v1/completions", `"echo":true`, "echo"},
		{"/v1/completions", `"best_of":3`, "best_of"},
		{"/v1/completions", `"suffix":"end"`, "suffix"},
		{"/v1/completions", `"logprobs":9`, "logprobs"},
		{"/v1/chat/completions", `"logprobs":true,"top_logprobs":30`, "top_logprobs"},
	} {
		body := "{" + chat + "," + c.fields + "}"
		if c.path == "/v1/completions" {
			body = `{"prompt":"Hi","max_tokens":2,` + c.fields + "}"
		}
		code, b := post(t, ts.URL+c.path, body)
		var e struct {
			Error struct{ Param, Message string }
		}
		json.Unmarshal(b, &e)
		if code != 400 || e.Error.Param != c.param || !strings.Contains(e.Error.Message, c.param) {
			t.Errorf("%s with %s: %d %s", c.path, c.fields, code, b)
		}
	}
	defaults := `"tools":[],"tool_choice":"none","response_format":{"type":"text"},"logit_bias":{},"frequency_penalty":0,` +
		`"presence_penalty":0,"n":1,"user":"u","parallel_tool_calls":true,"store":false,"modalities":["text"]`
	if code, b := post(t, ts.URL+"/v1/chat/completions", "{"+chat+","+defaults+"}"); code != 200 {
		t.Errorf("defaults refused: %d %s", code, b)
	}
}

// logSoftmax is the log-probability of each token under softmax(logits).
func logSoftmax(logits []float32) []float64 {
	mx := slices.Max(logits)
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v - mx))
	}
	out := make([]float64, len(logits))
	for i, v := range logits {
		out[i] = float64(v-mx) - math.Log(sum)
	}
	return out
}

// logprobs are the target's log softmax at each chosen token, greedy and
// sampled, with a draft as without, on chat and completions: what a fresh
// forward over the text gives.
func TestLogprobs(t *testing.T) {
	m := tinyModel(t)
	ref, err := runner.New(m, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	target := ref.Slot(0).Target()
	check := func(name string, prompt, tokens []int, lps []float64, tops [][]float64) {
		t.Helper()
		if len(tokens) != len(lps) || len(tokens) == 0 {
			t.Fatalf("%s: %d tokens, %d logprobs", name, len(tokens), len(lps))
		}
		for i, tok := range tokens {
			target.Truncate(0)
			logits, err := target.Forward(append(slices.Clone(prompt), tokens[:i]...))
			if err != nil {
				t.Fatal(err)
			}
			want := logSoftmax(logits)
			if math.Abs(lps[i]-want[tok]) > 2e-3 {
				t.Fatalf("%s, token %d: logprob %.5f, log softmax %.5f", name, i, lps[i], want[tok])
			}
			if len(tops[i]) != 3 || math.Abs(tops[i][0]-slices.Max(want)) > 2e-3 || tops[i][0] < tops[i][1] {
				t.Fatalf("%s, token %d: top logprobs %v, best %.5f", name, i, tops[i], slices.Max(want))
			}
		}
	}
	prompt := m.Tok.Encode("Once upon a time", true, false)
	for _, o := range []runner.Options{testOptions(), func() runner.Options {
		o := testOptions()
		o.Draft = runner.DraftChoice{Kind: runner.DraftNgram}
		return o
	}()} {
		ts := startWith(t, server.Config{}, m, o)
		for _, temp := range []string{"0", "1"} {
			code, b := post(t, ts.URL+"/v1/completions", `{"prompt":"Once upon a time","max_tokens":24,"seed":3,"logprobs":3,"temperature":`+temp+`}`)
			var res struct {
				Choices []struct {
					Logprobs struct {
						Tokens        []string
						TokenLogprobs []float64            `json:"token_logprobs"`
						TopLogprobs   []map[string]float64 `json:"top_logprobs"`
					}
				}
			}
			if code != 200 || json.Unmarshal(b, &res) != nil {
				t.Fatalf("%d %s", code, b)
			}
			lp := res.Choices[0].Logprobs
			tokens := reference(t, ref, prompt, 24, temp == "1")
			var tops [][]float64
			for i, text := range lp.Tokens {
				if i >= len(tokens) || m.Tok.Piece(tokens[i]) != text {
					t.Fatalf("token %d is %q, the reference generation's %v", i, text, tokens)
				}
				var top []float64
				for _, v := range lp.TopLogprobs[i] {
					top = append(top, v)
				}
				slices.Sort(top)
				slices.Reverse(top)
				tops = append(tops, top)
			}
			check("completions "+o.Draft.String()+" temp "+temp, prompt, tokens, lp.TokenLogprobs, tops)
		}
		code, b := post(t, ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":16,"logprobs":true,"top_logprobs":3,"temperature":0}`)
		var answer struct {
			Choices []struct {
				Logprobs struct {
					Content []struct {
						Token       string
						Logprob     float64
						Bytes       []int
						TopLogprobs []struct{ Logprob float64 } `json:"top_logprobs"`
					}
				}
			}
		}
		if code != 200 || json.Unmarshal(b, &answer) != nil {
			t.Fatalf("%d %s", code, b)
		}
		chatPrompt, _ := m.ChatTokens([]chat.Message{{Role: "user", Content: "Once upon a time"}})
		tokens := reference(t, ref, chatPrompt, 16, false)
		var lps []float64
		var tops [][]float64
		for i, c := range answer.Choices[0].Logprobs.Content {
			if i >= len(tokens) || m.Tok.Piece(tokens[i]) != c.Token {
				t.Fatalf("chat token %d is %q, the reference generation's %v", i, c.Token, tokens)
			}
			lps = append(lps, c.Logprob)
			var top []float64
			for _, x := range c.TopLogprobs {
				top = append(top, x.Logprob)
			}
			tops = append(tops, top)
			if len(c.Bytes) != len(c.Token) {
				t.Errorf("bytes %v of %q", c.Bytes, c.Token)
			}
		}
		check("chat "+o.Draft.String(), chatPrompt, tokens, lps, tops)
	}
}

// reference is what the target alone generates of prompt: greedy, or
// sampled as the server samples at temperature 1 with seed 3.
func reference(t *testing.T, r *runner.Runner, prompt []int, n int, sampled bool) []int {
	t.Helper()
	var out []int
	p := engine.SamplerParams{TopP: 1}
	if sampled {
		p.Temperature, p.Seed = 1, 3
	}
	req := engine.Request{Prompt: prompt, MaxTokens: n, Sampler: p, Stop: r.Model().Tok.IsEOG}
	if _, err := r.Slot(0).Generate(context.Background(), req, func(tok int) error { out = append(out, tok); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}
