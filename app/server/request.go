package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"

	"dovetail/app/runner"
	"dovetail/engine"
	"dovetail/models/chat"
	"dovetail/models/tokenizer"
)

// genRequest holds the fields of /v1/chat/completions and /v1/completions
// that Dovetail reads. Optional fields are pointers so that absent and zero
// differ (temperature 0 is greedy; absent is OpenAI's default, 1). Fields
// it does not know are ignored, as clients send many.
type genRequest struct {
	Model               string          `json:"model"`
	Messages            json.RawMessage `json:"messages"`
	Prompt              json.RawMessage `json:"prompt"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	Seed                *int64          `json:"seed"`
	Stop                json.RawMessage `json:"stop"`
	Stream              *bool           `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage *bool `json:"include_usage"`
	} `json:"stream_options"`
	N *int64 `json:"n"`
	// Logprobs is a boolean for chat, the number of alternatives for
	// completions; TopLogprobs is chat's number of alternatives.
	Logprobs    json.RawMessage `json:"logprobs"`
	TopLogprobs *int64          `json:"top_logprobs"`
	// llama.cpp's penalties (penalties.go).
	FrequencyPenalty *float64 `json:"frequency_penalty"`
	PresencePenalty  *float64 `json:"presence_penalty"`
	// Fields Dovetail does not implement: refused when they would change
	// the answer (refuse).
	unsupported
}

// job is a validated request, ready to run on its leased model.
type job struct {
	chat         bool
	lease        *runner.Lease
	prompt       []int
	maxTokens    int
	sampler      engine.SamplerParams
	stops        []string
	stream       bool
	includeUsage bool
	logprobs     bool
	topLogprobs  int
	numCtx       int       // ollama's num_ctx (0: the model's context)
	onToken      func(int) // told each emitted token (ollama's context)
}

// maxBody bounds a request body; a prompt longer than any context fits
// many times over.
const maxBody = 8 << 20

// OpenAI's limits and defaults.
const (
	maxStops                = 4
	defaultCompletionTokens = 16 // /v1/completions only; chat runs to the end of the context
)

func decodeBody(r *http.Request, v any) *apiError {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			e := invalid("", "request_too_large", "The request body is larger than %d bytes.", maxBody)
			e.Status = http.StatusRequestEntityTooLarge
			return e
		}
		return invalid("", "", "Could not read the request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return invalid("", "", "The request body is empty; send a JSON object.")
	}
	err = json.Unmarshal(body, v)
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te) && te.Field != "":
		return invalid(te.Field, "invalid_type", "Invalid type for '%s': expected %s, got %s.", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
	case errors.As(err, &te):
		return invalid("", "", "The request body must be a JSON object, got %s.", te.Value)
	case errors.As(err, &se):
		return invalid("", "", "The request body is not valid JSON: %v (at byte %d).", se, se.Offset)
	default:
		return invalid("", "", "The request body is not valid JSON: %v.", err)
	}
}

// jsonKind names a Go kind the way a JSON user knows it.
func jsonKind(k string) string {
	switch {
	case strings.HasPrefix(k, "int") || strings.HasPrefix(k, "uint"):
		return "an integer"
	case strings.HasPrefix(k, "float"):
		return "a number"
	case k == "bool":
		return "a boolean"
	case k == "string":
		return "a string"
	case k == "slice" || k == "array":
		return "an array"
	}
	return "an object"
}

// isNull reports an absent or null field.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || bytes.Equal(t, []byte("null"))
}

// unknownModel is the 404 of a model name no entry answers to.
func (s *Server) unknownModel(name string) *apiError {
	var names []string
	for _, e := range s.fleet.Entries() {
		names = append(names, "'"+e.Name+"'")
	}
	e := notFound("The model '%s' does not exist; this server runs %s.", name, strings.Join(names, ", "))
	e.Param, e.Code = "model", "model_not_found"
	return e
}

// parseCommon reads the fields both endpoints share.
func (s *Server) parseCommon(req *genRequest, j *job) *apiError {
	if _, ok := s.fleet.Lookup(req.Model); !ok {
		return s.unknownModel(req.Model)
	}
	if req.N != nil && *req.N != 1 {
		return invalid("n", "", "Only n=1 is supported, got %d.", *req.N)
	}
	if e := req.refuse(j.chat); e != nil {
		return e
	}
	if e := parseLogprobs(req, j); e != nil {
		return e
	}
	if req.Stream != nil {
		j.stream = *req.Stream
	}
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage != nil {
		if !j.stream {
			return invalid("stream_options", "", "stream_options is only allowed when stream is true.")
		}
		j.includeUsage = *req.StreamOptions.IncludeUsage
	}

	temp, topP := 1.0, 1.0
	if req.Temperature != nil {
		temp = *req.Temperature
		if math.IsNaN(temp) || temp < 0 || temp > 2 {
			return invalid("temperature", "", "temperature must be between 0 and 2, got %v.", temp)
		}
	}
	if req.TopP != nil {
		topP = *req.TopP
		if math.IsNaN(topP) || topP < 0 || topP > 1 {
			return invalid("top_p", "", "top_p must be between 0 and 1, got %v.", topP)
		}
	}
	j.sampler = engine.SamplerParams{Temperature: float32(temp), TopP: float32(topP)}
	if topP == 0 {
		// The smallest set with probability ≥ 0 is the most likely token;
		// the engine's TopP 0 would mean "off" instead.
		j.sampler.TopK = 1
	}
	if e := req.penalties(&j.sampler); e != nil {
		return e
	}
	if req.Seed != nil {
		j.sampler.Seed = uint64(*req.Seed)
	} else {
		j.sampler.Seed = rand.Uint64()
	}

	stops, e := parseStop(req.Stop)
	if e != nil {
		return e
	}
	j.stops = stops
	s.modelParams(req.Model).Apply(&j.sampler, &j.stops, nil, req.sets)
	return nil
}

func parseStop(raw json.RawMessage) ([]string, *apiError) {
	if isNull(raw) {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, invalid("stop", "invalid_type", "stop must be a string or an array of strings.")
	}
	if len(list) > maxStops {
		return nil, invalid("stop", "", "stop may hold at most %d strings, got %d.", maxStops, len(list))
	}
	var out []string
	for _, s := range list {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// resolveMaxTokens applies the limit the client asked for (or the
// endpoint's default) and checks that prompt and answer fit the context.
func (s *Server) resolveMaxTokens(req *genRequest, j *job, def int) *apiError {
	param, lim := "max_tokens", req.MaxTokens
	if req.MaxCompletionTokens != nil {
		param, lim = "max_completion_tokens", req.MaxCompletionTokens
	}
	ctx := j.lease.Runner().Context()
	if len(j.prompt) == 0 {
		return invalid("", "", "The prompt is empty.")
	}
	if lim == nil {
		if len(j.prompt) >= ctx {
			what := "prompt"
			if j.chat {
				what = "messages"
			}
			return invalid(what, "context_length_exceeded",
				"This model's maximum context length is %d tokens, but the prompt has %d tokens.", ctx, len(j.prompt))
		}
		j.maxTokens = ctx - len(j.prompt)
		if def > 0 {
			j.maxTokens = min(j.maxTokens, def)
		}
		return nil
	}
	if *lim < 1 {
		return invalid(param, "", "%s must be at least 1, got %d.", param, *lim)
	}
	if int64(len(j.prompt))+*lim > int64(ctx) {
		return invalid(param, "context_length_exceeded",
			"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the prompt, %d for the completion). Reduce the prompt or %s.",
			ctx, int64(len(j.prompt))+*lim, len(j.prompt), *lim, param)
	}
	j.maxTokens = int(*lim)
	return nil
}

// chatMessage is a message as OpenAI sends it: content is a string, an
// array of parts, or null (an assistant turn that only called tools).
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type contentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func parseMessages(raw json.RawMessage) ([]chat.Message, *apiError) {
	if isNull(raw) {
		return nil, invalid("messages", "", "Missing required parameter: 'messages'.")
	}
	var in []chatMessage
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, invalid("messages", "invalid_type", "messages must be an array of {role, content} objects.")
	}
	if len(in) == 0 {
		return nil, invalid("messages", "", "messages must hold at least one message.")
	}
	out := make([]chat.Message, len(in))
	for i, m := range in {
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "user", "assistant", "tool":
		case "developer": // OpenAI's new name for system
			m.Role = "system"
		case "":
			return nil, invalid(param+".role", "", "Missing required parameter: '%s.role'.", param)
		default:
			return nil, invalid(param+".role", "", "Invalid role '%s': expected system, developer, user, assistant or tool.", m.Role)
		}
		text, e := messageText(m.Content, param+".content")
		if e != nil {
			return nil, e
		}
		out[i] = chat.Message{Role: m.Role, Content: text}
	}
	return out, nil
}

func messageText(raw json.RawMessage, param string) (string, *apiError) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []contentPart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", invalid(param, "invalid_type", "'%s' must be a string or an array of text parts.", param)
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", invalid(param, "", "Content parts of type '%s' are not supported; only 'text'.", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// parsePrompt accepts what OpenAI accepts for a single prompt: a string, an
// array of one string, an array of token ids, or an array of one such array.
func parsePrompt(tok *tokenizer.Tokenizer, raw json.RawMessage) ([]int, *apiError) {
	if isNull(raw) {
		return nil, invalid("prompt", "", "Missing required parameter: 'prompt'.")
	}
	var text string
	if json.Unmarshal(raw, &text) == nil {
		return tok.Encode(text, true, false), nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil {
		if len(texts) != 1 {
			return nil, invalid("prompt", "", "Only one prompt per request is supported, got %d.", len(texts))
		}
		return tok.Encode(texts[0], true, false), nil
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err != nil {
		var nested [][]int
		if json.Unmarshal(raw, &nested) != nil {
			return nil, invalid("prompt", "invalid_type", "prompt must be a string, an array of one string, or an array of token ids.")
		}
		if len(nested) != 1 {
			return nil, invalid("prompt", "", "Only one prompt per request is supported, got %d.", len(nested))
		}
		ids = nested[0]
	}
	for _, id := range ids {
		if id < 0 || id >= tok.VocabSize() {
			return nil, invalid("prompt", "", "Token id %d is outside the vocabulary [0, %d).", id, tok.VocabSize())
		}
	}
	return ids, nil
}
