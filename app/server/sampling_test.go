package server_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"dovetail/app/runner"
	"dovetail/app/server"
	"dovetail/engine"
)

// generateWith is what the target alone generates of prompt with p.
func generateWith(t *testing.T, r *runner.Runner, prompt []int, n int, p engine.SamplerParams) []int {
	t.Helper()
	var out []int
	req := engine.Request{Prompt: prompt, MaxTokens: n, Sampler: p, Stop: r.Model().Tok.IsEOG}
	if _, err := r.Slot(0).Generate(context.Background(), req, func(tok int) error { out = append(out, tok); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// The penalties, typical-p and Mirostat of both APIs reach the sampler:
// a server drafting with the n-gram drafter answers each request with the
// very tokens the target alone samples with those settings, which differ
// from the tokens without them.
func TestSamplingOptionsReachTheSampler(t *testing.T) {
	m := tinyModel(t)
	ref, err := runner.New(m, testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	o := testOptions()
	o.Draft = runner.DraftChoice{Kind: runner.DraftNgram}
	ts := startWith(t, server.Config{}, m, o)
	const text, n = "Once upon a time", 32
	prompt := m.Tok.Encode(text, true, false)
	plain := engine.SamplerParams{Temperature: 1, TopP: 1, RepeatPenalty: 1}

	// ollama's options, every other sampling setting made neutral.
	for _, c := range []struct {
		options string
		want    engine.SamplerParams
	}{
		{`"mirostat":2,"mirostat_tau":1.5,"mirostat_eta":0.3,"seed":3`, engine.SamplerParams{Mirostat: 2, MirostatTau: 1.5, MirostatEta: 0.3, Seed: 3}},
		{`"mirostat":1,"mirostat_tau":2,"seed":4`, engine.SamplerParams{Mirostat: 1, MirostatTau: 2, MirostatEta: 0.1, Seed: 4}},
		{`"typical_p":0.6,"seed":5`, engine.SamplerParams{TypicalP: 0.6, Seed: 5}},
		{`"frequency_penalty":1.2,"presence_penalty":0.6,"repeat_last_n":-1,"penalize_newline":true,"seed":6`,
			engine.SamplerParams{FrequencyPenalty: 1.2, PresencePenalty: 0.6, RepeatLastN: -1, Seed: 6}},
		{`"repeat_penalty":1.8,"repeat_last_n":4,"seed":7`, engine.SamplerParams{RepeatPenalty: 1.8, RepeatLastN: 4, Seed: 7}},
	} {
		body := `{"model":"default","prompt":"` + text + `","raw":true,"stream":false,"options":{"temperature":1,"top_k":0,"top_p":1,"repeat_penalty":1,"num_predict":32,` + c.options + `}}`
		code, b := post(t, ts.URL+"/api/generate", body)
		var res struct{ Context []int }
		if code != 200 || json.Unmarshal(b, &res) != nil || len(res.Context) < len(prompt) {
			t.Fatalf("%s: %d %s", c.options, code, b)
		}
		got := res.Context[len(prompt):]
		without, want := plain, c.want
		without.Seed = want.Seed
		want.Temperature, want.TopP, want.RepeatPenalty = 1, 1, max(want.RepeatPenalty, 1)
		if exp := generateWith(t, ref, prompt, n, want); !slices.Equal(got, exp) {
			t.Errorf("%s: tokens %v, the target alone samples %v", c.options, got, exp)
		}
		if slices.Equal(got, generateWith(t, ref, prompt, n, without)) {
			t.Errorf("%s: the tokens sampled without the options: the test cannot tell", c.options)
		}
	}

	// repeat_last_n 0 is no penalty at all, whatever the order of options.
	for _, opts := range []string{`"repeat_last_n":0,"frequency_penalty":2,"presence_penalty":2,"repeat_penalty":3`, `"repeat_penalty":3,"frequency_penalty":2,"repeat_last_n":0`} {
		code, b := post(t, ts.URL+"/api/generate", `{"model":"default","prompt":"`+text+`","raw":true,"stream":false,"options":{"temperature":0,"num_predict":32,`+opts+`}}`)
		var res struct{ Context []int }
		if code != 200 || json.Unmarshal(b, &res) != nil {
			t.Fatalf("%s: %d %s", opts, code, b)
		}
		if want := generateWith(t, ref, prompt, n, engine.SamplerParams{}); !slices.Equal(res.Context[len(prompt):], want) {
			t.Errorf("%s: %v, greedy without penalties gives %v", opts, res.Context[len(prompt):], want)
		}
	}

	// OpenAI's frequency_penalty and presence_penalty, greedy: what the
	// completion's tokens are.
	code, b := post(t, ts.URL+"/v1/completions", `{"prompt":"`+text+`","max_tokens":32,"temperature":0,"logprobs":1,"frequency_penalty":2,"presence_penalty":2}`)
	var res struct {
		Choices []struct{ Logprobs struct{ Tokens []string } }
	}
	if code != 200 || json.Unmarshal(b, &res) != nil {
		t.Fatalf("completions: %d %s", code, b)
	}
	want := generateWith(t, ref, prompt, n, engine.SamplerParams{TopP: 1, FrequencyPenalty: 2, PresencePenalty: 2})
	var pieces []string
	for _, tok := range want {
		pieces = append(pieces, m.Tok.Piece(tok))
	}
	if got := res.Choices[0].Logprobs.Tokens; !slices.Equal(got, pieces) {
		t.Errorf("completions: %q, the target alone gives %q", got, pieces)
	}
	if slices.Equal(want, generateWith(t, ref, prompt, n, engine.SamplerParams{})) {
		t.Error("the penalties change nothing in greedy completions: the test cannot tell")
	}
}

// Each sampling field out of range is a 400 naming it, in both APIs.
func TestSamplingOptionsOutOfRange(t *testing.T) {
	ts := start(t, server.Config{})
	for _, c := range []struct{ path, field, value string }{
		{"/v1/chat/completions", "frequency_penalty", "2.5"},
		{"/v1/chat/completions", "presence_penalty", "-2.01"},
		{"/v1/completions", "frequency_penalty", "-3"},
		{"/v1/completions", "presence_penalty", "7"},
		{"/v1/completions", "presence_penalty", `"high"`},
	} {
		body := `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":2,"` + c.field + `":` + c.value + `}`
		if c.path == "/v1/completions" {
			body = `{"prompt":"Hi","max_tokens":2,"` + c.field + `":` + c.value + `}`
		}
		code, b := post(t, ts.URL+c.path, body)
		var e struct {
			Error struct{ Param, Message string }
		}
		json.Unmarshal(b, &e)
		if code != 400 || e.Error.Param != c.field || !strings.Contains(e.Error.Message, c.field) {
			t.Errorf("%s with %s %s: %d %s", c.path, c.field, c.value, code, b)
		}
	}
	for _, c := range []struct{ option, value string }{
		{"repeat_last_n", "-2"}, {"repeat_last_n", "3.5"}, {"frequency_penalty", "2.5"}, {"presence_penalty", "-3"},
		{"typical_p", "1.5"}, {"typical_p", "-0.1"}, {"mirostat", "3"}, {"mirostat", "1.5"}, {"mirostat", "-1"},
		{"mirostat_tau", "-1"}, {"mirostat_eta", "-0.1"}, {"typical_p", `"low"`},
	} {
		for _, path := range []string{"/api/generate", "/api/chat"} {
			body := `{"model":"default","prompt":"x","messages":[{"role":"user","content":"x"}],"stream":false,"options":{"` + c.option + `":` + c.value + `}}`
			code, b := post(t, ts.URL+path, body)
			if code != 400 || !strings.Contains(string(b), `"error"`) || !strings.Contains(string(b), "options."+c.option) {
				t.Errorf("%s with %s %s: %d %s", path, c.option, c.value, code, b)
			}
		}
	}
	// In range, and what ollama itself ignores, is taken.
	for _, opts := range []string{`"penalize_newline":true`, `"penalize_newline":false,"repeat_last_n":100000000`, `"mirostat":0,"typical_p":1`,
		`"frequency_penalty":-2,"presence_penalty":2,"typical_p":0`} {
		code, b := post(t, ts.URL+"/api/generate", `{"model":"default","prompt":"x","stream":false,"options":{"num_predict":2,`+opts+`}}`)
		if code != 200 {
			t.Errorf("%s: %d %s", opts, code, b)
		}
	}
}
