package server_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ollama/ollama/api"
	"github.com/openai/openai-go/v3"

	"dovetail/app/server"
	"dovetail/internal/golden"
)

// embedCtx is the test servers' context: short, so that a long input is
// cheap to write.
const embedCtx = 64

// longText has more than embedCtx tokens.
var longText = strings.Repeat("Once upon a time there was a dog. ", 20)

func embedServer(t *testing.T) *testServer {
	o := testOptions()
	o.Ctx = embedCtx
	return startWith(t, server.Config{}, tinyModel(t), o)
}

// llamaCppEmbedding is llama.cpp's vector of the embedded model's file for
// a prompt of testdata/golden/embedding.
func llamaCppEmbedding(t *testing.T, prompt string) []float32 {
	t.Helper()
	cases, err := golden.EmbedCases()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		if strings.HasSuffix(c.Model, tinyModel(t).Name) && c.Prompt == prompt {
			return c.Embedding
		}
	}
	t.Fatalf("no llama.cpp embedding of %q for %s", prompt, tinyModel(t).Name)
	return nil
}

// asStatus is errors.As for ollama's client's errors.
func asStatus(err error, se *api.StatusError) bool { return errors.As(err, se) }

func to32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// The bound on the embedded (Q8_0) model's vectors against llama.cpp's
// (app/runner's TestEmbedMatchesLlamaCpp holds every file to them).
const embedMinCosine = 0.9999

// OpenAI's client embeds a string and a batch: the shape it reads, one
// vector per input in order, llama.cpp's vector, usage counting tokens.
func TestOpenAIEmbeddings(t *testing.T) {
	ts := embedServer(t)
	c := client(ts, "")
	ctx := context.Background()
	p1, p2 := "Once upon a time", "Lily and Tom went to the park. They saw"
	one, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "default", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(p1)}})
	if err != nil {
		t.Fatal(err)
	}
	if one.Object != "list" || len(one.Data) != 1 || one.Data[0].Object != "embedding" || one.Data[0].Index != 0 ||
		one.Model != tinyModel(t).Name || one.Usage.PromptTokens != 6 || one.Usage.TotalTokens != 6 {
		t.Fatalf("response %s", one.RawJSON())
	}
	v1 := to32(one.Data[0].Embedding)
	if cos := golden.Cosine(v1, llamaCppEmbedding(t, p1)); cos < embedMinCosine || math.Abs(golden.Norm(v1)-1) > 1e-5 {
		t.Errorf("cosine to llama.cpp's %.7f, norm %.6f", cos, golden.Norm(v1))
	}

	batch, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "default", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{p2, p1}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(batch.Data) != 2 || batch.Data[0].Index != 0 || batch.Data[1].Index != 1 || batch.Usage.PromptTokens != 6+13 {
		t.Fatalf("batch %s", batch.RawJSON())
	}
	if !slices.Equal(to32(batch.Data[1].Embedding), v1) {
		t.Error("a batch's second vector differs from the same text alone")
	}
	if cos := golden.Cosine(to32(batch.Data[0].Embedding), llamaCppEmbedding(t, p2)); cos < embedMinCosine {
		t.Errorf("batch item 0: cosine to llama.cpp's %.7f", cos)
	}

	// Token ids are embedded as given: the text's own tokens give its vector.
	ids := tinyModel(t).EmbedTokens(p1)
	toks := make([]int64, len(ids))
	for i, id := range ids {
		toks[i] = int64(id)
	}
	byIDs, err := c.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "default", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfTokens: toks}})
	if err != nil || !slices.Equal(to32(byIDs.Data[0].Embedding), v1) {
		t.Errorf("token ids: %v", err)
	}
}

// encoding_format base64 is the float vector's little-endian float32
// bytes; dimensions cuts the vector and makes it unit length again.
func TestOpenAIEmbeddingsFormats(t *testing.T) {
	ts := embedServer(t)
	type list struct {
		Data []struct {
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
	}
	get := func(body string) json.RawMessage {
		t.Helper()
		code, b := post(t, ts.URL+"/v1/embeddings", body)
		var l list
		unmarshal(t, b, &l)
		if code != http.StatusOK || len(l.Data) != 1 {
			t.Fatalf("%s: %d %s", body, code, b)
		}
		return l.Data[0].Embedding
	}
	var floats []float32
	unmarshal(t, get(`{"input":"Once upon a time","encoding_format":"float"}`), &floats)
	var b64 string
	unmarshal(t, get(`{"input":"Once upon a time","encoding_format":"base64"}`), &b64)
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != 4*len(floats) {
		t.Fatalf("base64 of %d bytes for %d floats: %v", len(raw), len(floats), err)
	}
	for i, f := range floats {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])); got != f {
			t.Fatalf("base64 component %d is %v, float's %v", i, got, f)
		}
	}

	var short []float32
	unmarshal(t, get(`{"input":"Once upon a time","dimensions":16}`), &short)
	want := slices.Clone(floats[:16])
	n := golden.Norm(want)
	for i := range want {
		want[i] = float32(float64(want[i]) / n)
	}
	if len(short) != 16 || math.Abs(golden.Norm(short)-1) > 1e-6 || golden.Cosine(short, want) < 1-1e-6 {
		t.Errorf("dimensions 16: %d long, norm %.7f, cosine to the cut full vector %.7f", len(short), golden.Norm(short), golden.Cosine(short, want))
	}
}

// What OpenAI's API refuses, refused with a 400 naming the field.
func TestOpenAIEmbeddingsRefused(t *testing.T) {
	ts := embedServer(t)
	for _, c := range []struct{ body, param string }{
		{`{"model":"default"}`, "input"},
		{`{"input":null}`, "input"},
		{`{"input":""}`, "input"},
		{`{"input":[]}`, "input"},
		{`{"input":["a",""]}`, "input[1]"},
		{`{"input":{"text":"a"}}`, "input"},
		{`{"input":["a",1]}`, "input"},
		{`{"input":[1,99999]}`, "input"},
		{`{"input":[[1,2],[]]}`, "input[1]"},
		{`{"input":[[1,2],[-1]]}`, "input[1]"},
		{`{"input":` + fmt.Sprintf("%q", longText) + `}`, "input"},
		{`{"input":["a",` + fmt.Sprintf("%q", longText) + `]}`, "input[1]"},
		{`{"input":"a","encoding_format":"int8"}`, "encoding_format"},
		{`{"input":"a","dimensions":0}`, "dimensions"},
		{`{"input":"a","dimensions":129}`, "dimensions"},
		{`{"input":"a","dimensions":"16"}`, "dimensions"},
	} {
		code, b := post(t, ts.URL+"/v1/embeddings", c.body)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Param   string `json:"param"`
			} `json:"error"`
		}
		unmarshal(t, b, &e)
		if code != http.StatusBadRequest || e.Error.Param != c.param || e.Error.Message == "" {
			t.Errorf("%s: %d %s; want 400 naming %s", c.body, code, b, c.param)
		}
	}
	if code, b := post(t, ts.URL+"/v1/embeddings", `{"model":"nope","input":"a"}`); code != http.StatusNotFound {
		t.Errorf("unknown model: %d %s", code, b)
	}
}

// ollama's client embeds one input and a batch, cut to dimensions, and
// with the older /api/embeddings; the vectors are llama.cpp's and the
// same through every endpoint.
func TestOllamaEmbed(t *testing.T) {
	ts := embedServer(t)
	c := ollamaClient(t, ts)
	ctx := context.Background()
	p1, p2 := "Once upon a time", "Lily and Tom went to the park. They saw"
	one, err := c.Embed(ctx, &api.EmbedRequest{Model: "tinystories656K-Q8_0", Input: p1})
	if err != nil {
		t.Fatal(err)
	}
	if one.Model != tinyModel(t).Name || len(one.Embeddings) != 1 || one.PromptEvalCount != 6 || one.TotalDuration <= 0 {
		t.Fatalf("embed %+v", one)
	}
	v1 := one.Embeddings[0]
	if cos := golden.Cosine(v1, llamaCppEmbedding(t, p1)); cos < embedMinCosine || math.Abs(golden.Norm(v1)-1) > 1e-5 {
		t.Errorf("cosine to llama.cpp's %.7f, norm %.6f", cos, golden.Norm(v1))
	}

	batch, err := c.Embed(ctx, &api.EmbedRequest{Model: "tinystories656K-Q8_0", Input: []string{p2, p1}})
	if err != nil {
		t.Fatal(err)
	}
	if len(batch.Embeddings) != 2 || !slices.Equal(batch.Embeddings[1], v1) || batch.PromptEvalCount != 6+13 {
		t.Fatalf("batch: %d vectors, %d tokens", len(batch.Embeddings), batch.PromptEvalCount)
	}

	short, err := c.Embed(ctx, &api.EmbedRequest{Model: "tinystories656K-Q8_0", Input: p1, Dimensions: 8})
	if err != nil || len(short.Embeddings[0]) != 8 || math.Abs(golden.Norm(short.Embeddings[0])-1) > 1e-6 ||
		golden.Cosine(short.Embeddings[0], v1[:8]) < 1-1e-6 {
		t.Errorf("dimensions 8: %+v, %v", short, err)
	}

	legacy, err := c.Embeddings(ctx, &api.EmbeddingRequest{Model: "tinystories656K-Q8_0", Prompt: p1})
	if err != nil || !slices.Equal(to32(legacy.Embedding), v1) {
		t.Errorf("/api/embeddings: %d values, %v", len(legacy.Embedding), err)
	}

	// No input loads the model and embeds nothing, as ollama does.
	for _, in := range []any{"", nil} {
		empty, err := c.Embed(ctx, &api.EmbedRequest{Model: "tinystories656K-Q8_0", Input: in})
		if err != nil || empty.Embeddings == nil || len(empty.Embeddings) != 0 {
			t.Errorf("input %v: %+v, %v", in, empty, err)
		}
	}
	if e, err := c.Embeddings(ctx, &api.EmbeddingRequest{Model: "tinystories656K-Q8_0"}); err != nil || e.Embedding == nil || len(e.Embedding) != 0 {
		t.Errorf("empty prompt: %+v, %v", e, err)
	}
}

// An input longer than the context is cut to it by default, and refused
// with truncate false, as ollama does; options.num_ctx cuts shorter.
func TestOllamaEmbedTruncate(t *testing.T) {
	ts := embedServer(t)
	c := ollamaClient(t, ts)
	ctx := context.Background()
	cut, err := c.Embed(ctx, &api.EmbedRequest{Model: "default", Input: longText})
	if err != nil || len(cut.Embeddings) != 1 || cut.PromptEvalCount != embedCtx {
		t.Fatalf("truncated: %d tokens, %v", cut.PromptEvalCount, err)
	}
	// The cut input is the text's first embedCtx tokens.
	ids := tinyModel(t).EmbedTokens(longText)[:embedCtx]
	body, _ := json.Marshal(map[string]any{"input": [][]int{ids}})
	code, b := post(t, ts.URL+"/v1/embeddings", string(body))
	var l struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	unmarshal(t, b, &l)
	if code != http.StatusOK || !slices.Equal(l.Data[0].Embedding, cut.Embeddings[0]) {
		t.Errorf("the truncated vector is not that of the first %d tokens (%d)", embedCtx, code)
	}

	no := false
	_, err = c.Embed(ctx, &api.EmbedRequest{Model: "default", Input: []string{"a", longText}, Truncate: &no})
	var se api.StatusError
	if !asStatus(err, &se) || se.StatusCode != http.StatusBadRequest || !strings.Contains(se.ErrorMessage, "input[1]") {
		t.Errorf("truncate false: %v", err)
	}
	short, err := c.Embed(ctx, &api.EmbedRequest{Model: "default", Input: longText, Options: map[string]any{"num_ctx": 10}})
	if err != nil || short.PromptEvalCount != 10 {
		t.Errorf("num_ctx 10: %d tokens, %v", short.PromptEvalCount, err)
	}
}

// What ollama's endpoints refuse: {"error"} with a 400 naming the field.
func TestOllamaEmbedRefused(t *testing.T) {
	ts := embedServer(t)
	for _, c := range []struct{ path, body, field string }{
		{"/api/embed", `{"input":[1,2]}`, "input"},
		{"/api/embed", `{"input":{"a":1}}`, "input"},
		{"/api/embed", `{"input":"a","dimensions":-1}`, "dimensions"},
		{"/api/embed", `{"input":"a","dimensions":1000}`, "dimensions"},
		{"/api/embed", `{"input":"a","truncate":"no"}`, "truncate"},
		{"/api/embed", `{"input":"a","options":{"num_ctx":"big"}}`, "options.num_ctx"},
		{"/api/embed", `{"input":"a","options":{"num_ctx":100000}}`, "options.num_ctx"},
		{"/api/embed", `{"input":` + fmt.Sprintf("%q", longText) + `,"truncate":false}`, "input"},
		{"/api/embeddings", `{"prompt":5}`, "prompt"},
		{"/api/embeddings", `{"prompt":` + fmt.Sprintf("%q", longText) + `,"options":{"num_ctx":0.5}}`, "options.num_ctx"},
	} {
		code, b := post(t, ts.URL+c.path, c.body)
		var e map[string]any
		unmarshal(t, b, &e)
		msg, _ := e["error"].(string)
		if code != http.StatusBadRequest || !strings.Contains(msg, c.field) {
			t.Errorf("%s %s: %d %s; want 400 naming %s", c.path, c.body, code, b, c.field)
		}
	}
	if code, b := post(t, ts.URL+"/api/embed", `{"model":"nope","input":"a"}`); code != http.StatusNotFound || !strings.Contains(string(b), `"error":"`) {
		t.Errorf("unknown model: %d %s", code, b)
	}
}
