package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"dovetail/app/cli"
	"dovetail/app/runner"
	"dovetail/app/server"
	"dovetail/internal/golden"
	"dovetail/models/chat"
)

func client(ts *testServer, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// cliRun is what `dovetail run --json` generates greedily.
func cliRun(t *testing.T, prompt string, n int) string {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := cli.Main([]string{"run", "--json", "--temp", "0", "-n", strconv.Itoa(n), "-p", prompt}, &out, &errOut, server.Start); code != 0 {
		t.Fatalf("dovetail run: exit %d: %s", code, errOut.String())
	}
	var r struct {
		Text string `json:"text"`
	}
	unmarshal(t, out.Bytes(), &r)
	return r.Text
}

type dovetailStats struct {
	PromptTokensPerSec float64 `json:"prompt_tokens_per_s"`
	GenTokensPerSec    float64 `json:"gen_tokens_per_s"`
	Rounds             *int    `json:"rounds"`
	Tau                *float64
	DraftVersion       *int `json:"draft_version"`
}

func extension(t *testing.T, raw string) dovetailStats {
	t.Helper()
	var s dovetailStats
	unmarshal(t, []byte(raw), &s)
	if s.PromptTokensPerSec <= 0 || s.GenTokensPerSec <= 0 || s.Rounds == nil {
		t.Errorf("dovetail statistics incomplete: %s", raw)
	}
	return s
}

const prompt = "Once upon a time, there was a little"

// A greedy completion is exactly what `dovetail run --temp 0` prints, whole
// or streamed, and the usage counts the tokens.
func TestOpenAICompletionsMatchRun(t *testing.T) {
	const n = 40
	want := cliRun(t, prompt, n)
	ts := start(t, server.Config{})
	c := client(ts, "")
	ctx := context.Background()
	params := openai.CompletionNewParams{
		Model:       "default",
		Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
		MaxTokens:   openai.Int(n),
		Temperature: openai.Float(0),
	}
	res, err := c.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if res.Object != "text_completion" || len(res.Choices) != 1 || res.Model != tinyModel(t).Name || !strings.HasPrefix(res.ID, "cmpl-") {
		t.Fatalf("response shape: %+v", res)
	}
	if got := res.Choices[0].Text; got != want {
		t.Errorf("completion\n%q\nwant (dovetail run)\n%q", got, want)
	}
	if res.Choices[0].FinishReason != "length" {
		t.Errorf("finish_reason %q, want length", res.Choices[0].FinishReason)
	}
	promptTokens := len(tinyModel(t).Tok.Encode(prompt, true, false))
	if u := res.Usage; u.PromptTokens != int64(promptTokens) || u.CompletionTokens != n || u.TotalTokens != int64(promptTokens+n) {
		t.Errorf("usage %+v, want %d + %d", u, promptTokens, n)
	}
	extension(t, res.JSON.ExtraFields["dovetail"].Raw())

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	var finish string
	var usage openai.CompletionUsage
	for stream.Next() {
		ch := stream.Current()
		if ch.Object != "text_completion" {
			t.Errorf("chunk object %q", ch.Object)
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Text)
			if c.FinishReason != "" {
				finish = string(c.FinishReason)
			}
		}
		if ch.Usage.TotalTokens > 0 {
			usage = ch.Usage
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != want || finish != "length" {
		t.Errorf("streamed %q (finish %q)\nwant %q (length)", text.String(), finish, want)
	}
	if usage.CompletionTokens != n || usage.PromptTokens != int64(promptTokens) {
		t.Errorf("streamed usage %+v", usage)
	}
}

func TestOpenAIChat(t *testing.T) {
	ts := start(t, server.Config{})
	c := client(ts, "")
	ctx := context.Background()
	const n = 32
	params := openai.ChatCompletionNewParams{
		Model:       "default",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
		MaxTokens:   openai.Int(n),
		Temperature: openai.Float(0),
	}
	res, err := c.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if res.Object != "chat.completion" || len(res.Choices) != 1 || !strings.HasPrefix(res.ID, "chatcmpl-") || res.Created == 0 {
		t.Fatalf("response shape: %+v", res)
	}
	msg := res.Choices[0].Message
	if msg.Role != "assistant" || msg.Content == "" {
		t.Errorf("message %+v", msg)
	}
	// The embedded model is not a chat model: the message is its prompt, so
	// the answer is the greedy completion of the same text.
	if want := cliRun(t, prompt, n); msg.Content != want {
		t.Errorf("chat answer\n%q\nwant\n%q", msg.Content, want)
	}
	promptTokens := int64(len(tinyModel(t).Tok.Encode(prompt, true, false)))
	if u := res.Usage; u.PromptTokens != promptTokens || u.CompletionTokens != n || u.TotalTokens != promptTokens+n {
		t.Errorf("usage %+v", u)
	}
	if res.Choices[0].FinishReason != "length" {
		t.Errorf("finish_reason %q", res.Choices[0].FinishReason)
	}
	extension(t, res.JSON.ExtraFields["dovetail"].Raw())

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := c.Chat.Completions.NewStreaming(ctx, params)
	acc := openai.ChatCompletionAccumulator{}
	chunks := 0
	for stream.Next() {
		ch := stream.Current()
		chunks++
		if ch.Object != "chat.completion.chunk" || ch.ID != stream.Current().ID {
			t.Errorf("chunk %+v", ch)
		}
		acc.AddChunk(ch)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks < 3 {
		t.Errorf("only %d chunks", chunks)
	}
	if got := acc.Choices[0].Message.Content; got != msg.Content {
		t.Errorf("streamed %q, want %q", got, msg.Content)
	}
	if acc.Choices[0].FinishReason != "length" || acc.Usage.CompletionTokens != n || acc.Usage.PromptTokens != promptTokens {
		t.Errorf("streamed finish %q usage %+v", acc.Choices[0].FinishReason, acc.Usage)
	}
}

func TestOpenAIModels(t *testing.T) {
	ts := start(t, server.Config{APIKey: "sekrit"})
	c := client(ts, "sekrit")
	page, err := c.Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != tinyModel(t).Name || page.Data[0].Object != "model" {
		t.Fatalf("models %+v", page.Data)
	}
	for _, name := range []string{"default", tinyModel(t).Name} {
		m, err := c.Models.Get(context.Background(), name)
		if err != nil || m.ID != tinyModel(t).Name {
			t.Errorf("get %q: %+v, %v", name, m, err)
		}
	}
	wrong := client(ts, "wrong")
	_, err = wrong.Models.List(context.Background())
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || apiErr.Code != "invalid_api_key" {
		t.Errorf("wrong key: %v", err)
	}
	_, err = c.Completions.New(context.Background(), openai.CompletionNewParams{
		Model:  "gpt-4",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")},
	})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Param != "model" {
		t.Errorf("unknown model: %v", err)
	}
}

// Stop strings end the text before them, whole or streamed, even when
// they span tokens; finish_reason is "stop".
func TestStopStrings(t *testing.T) {
	ts := start(t, server.Config{})
	c := client(ts, "")
	ctx := context.Background()
	full := cliRun(t, prompt, 60)
	for _, stop := range []string{"girl named", "a", ".", "\n", "zzz-never"} {
		want, finish := full, "length"
		if i := strings.Index(full, stop); i >= 0 {
			want, finish = full[:i], "stop"
		}
		params := openai.CompletionNewParams{
			Model:       "default",
			Prompt:      openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
			MaxTokens:   openai.Int(60),
			Temperature: openai.Float(0),
			Stop:        openai.CompletionNewParamsStopUnion{OfStringArray: []string{"zzz-other", stop}},
		}
		res, err := c.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Choices[0]; got.Text != want || string(got.FinishReason) != finish {
			t.Errorf("stop %q: %q (%s)\nwant %q (%s)", stop, got.Text, got.FinishReason, want, finish)
		}
		stream := c.Completions.NewStreaming(ctx, params)
		var text strings.Builder
		for stream.Next() {
			for _, ch := range stream.Current().Choices {
				text.WriteString(ch.Text)
				// No prefix of the stop string may be sent and then cut.
				if !strings.HasPrefix(want, text.String()) {
					t.Fatalf("stop %q: streamed %q, not a prefix of %q", stop, text.String(), want)
				}
			}
		}
		if err := stream.Err(); err != nil || text.String() != want {
			t.Errorf("stop %q: streamed %q, %v; want %q", stop, text.String(), err, want)
		}
	}
}

// The same seed gives the same sampled text; OpenAI's defaults
// (temperature 1, top_p 1) apply when the fields are absent.
func TestSeeds(t *testing.T) {
	ts := start(t, server.Config{})
	gen := func(seed int) string {
		code, body := post(t, ts.URL+"/v1/completions", `{"prompt":"Once upon a time","max_tokens":30,"seed":`+strconv.Itoa(seed)+`}`)
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		var r struct {
			Choices []struct{ Text string }
		}
		unmarshal(t, body, &r)
		return r.Choices[0].Text
	}
	a, b, c := gen(7), gen(7), gen(8)
	if a != b {
		t.Errorf("seed 7 gave %q and %q", a, b)
	}
	if a == c {
		t.Errorf("seeds 7 and 8 both gave %q", a)
	}
	greedy := cliRun(t, "Once upon a time", 30)
	if a == greedy && c == greedy {
		t.Error("absent temperature behaved as greedy; OpenAI's default is 1")
	}
}

// A completion whose prompt is token ids runs those ids.
func TestPromptTokens(t *testing.T) {
	ts := start(t, server.Config{})
	ids := tinyModel(t).Tok.Encode(prompt, true, false)
	b, _ := json.Marshal(map[string]any{"prompt": ids, "max_tokens": 20, "temperature": 0})
	code, body := post(t, ts.URL+"/v1/completions", string(b))
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var r struct {
		Choices []struct{ Text string }
	}
	unmarshal(t, body, &r)
	if want := cliRun(t, prompt, 20); r.Choices[0].Text != want {
		t.Errorf("%q, want %q", r.Choices[0].Text, want)
	}
}

// A model's own template is used for chat: the BOS text it writes is not
// doubled by the tokenizer's BOS, and its raise_exception is a 400.
func TestChatTemplate(t *testing.T) {
	m := *tinyModel(t)
	bos := m.Tok.TokenText(m.Tok.BOS())
	m.Chat = chat.New("{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"+
		"{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}", bos, "")
	ts := startWith(t, server.Config{}, &m, testOptions())
	code, body := post(t, ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"`+prompt+`"}],"max_tokens":12,"temperature":0}`)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var r openai.ChatCompletion
	unmarshal(t, body, &r)
	if want := int64(len(m.Tok.Encode(prompt, true, false))); r.Usage.PromptTokens != want {
		t.Errorf("prompt tokens %d, want %d (one BOS)", r.Usage.PromptTokens, want)
	}
	if want := cliRun(t, prompt, 12); r.Choices[0].Message.Content != want {
		t.Errorf("%q, want %q", r.Choices[0].Message.Content, want)
	}
	code, body = post(t, ts.URL+"/v1/chat/completions", `{"messages":[{"role":"system","content":"x"},{"role":"user","content":"y"}]}`)
	if code != 400 || !strings.Contains(string(body), "System role not supported") {
		t.Errorf("template refusal: %d %s", code, body)
	}
}

// A model file is served by its base name, however the path was typed,
// and requests may name it with or without the extension.
func TestModelIDIsBaseName(t *testing.T) {
	m, err := runner.OpenModel(golden.ModelPath("stories260K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ts := startWith(t, server.Config{}, m, testOptions())
	code, body := do(t, http.MethodGet, ts.URL+"/v1/models", "")
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	unmarshal(t, body, &list)
	if code != 200 || len(list.Data) != 1 || list.Data[0].ID != "stories260K-f32.gguf" {
		t.Fatalf("/v1/models: %d %s", code, body)
	}
	for _, name := range []string{"stories260K-f32.gguf", "stories260K-f32", "default"} {
		code, body := post(t, ts.URL+"/v1/completions", `{"model":"`+name+`","prompt":"Once","max_tokens":2}`)
		if code != 200 {
			t.Errorf("model %q: %d %s", name, code, body)
		}
	}
	if code, _ := post(t, ts.URL+"/v1/completions", `{"model":"`+golden.ModelPath("other.gguf")+`","prompt":"Once"}`); code != 404 {
		t.Errorf("another model's path: %d", code)
	}
}
