package server

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"dovetail/app/runner"
	"dovetail/engine"
)

// What ollama's generating endpoints take: the request, its options and
// keep_alive, checked and turned into a job.

// ollamaDuration reads keep_alive: a duration string ("5m"), seconds, or
// negative for forever.
type ollamaDuration struct {
	d   time.Duration
	set bool
}

func (o *ollamaDuration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	o.set = true
	switch t := v.(type) {
	case float64:
		o.d = time.Duration(t * float64(time.Second))
	case string:
		d, err := time.ParseDuration(t)
		if err != nil {
			return fmt.Errorf("keep_alive %q: %v", t, err)
		}
		o.d = d
	case nil:
		o.set = false
	default:
		return fmt.Errorf("keep_alive must be a duration or a number of seconds")
	}
	if o.d < 0 {
		o.d = -1
	}
	return nil
}

// ollamaRequest is what /api/chat and /api/generate share.
type ollamaRequest struct {
	Model     string          `json:"model"`
	Stream    *bool           `json:"stream"`
	Format    json.RawMessage `json:"format"`
	Options   map[string]any  `json:"options"`
	KeepAlive ollamaDuration  `json:"keep_alive"`
	Tools     json.RawMessage `json:"tools"`
	Think     json.RawMessage `json:"think"`
	// /api/chat
	Messages []struct {
		Role    string          `json:"role"`
		Content string          `json:"content"`
		Images  json.RawMessage `json:"images"`
	} `json:"messages"`
	// /api/generate
	Prompt   string          `json:"prompt"`
	System   string          `json:"system"`
	Template string          `json:"template"`
	Suffix   string          `json:"suffix"`
	Context  []int           `json:"context"`
	Raw      bool            `json:"raw"`
	Images   json.RawMessage `json:"images"`
}

// refuse names what the request asks for that Dovetail does not do.
func (q *ollamaRequest) refuse() *apiError {
	no := func(field, what string) *apiError {
		return invalid(field, "unsupported_parameter", "'%s' is not supported by this server: %s.", field, what)
	}
	switch {
	case nonEmpty(q.Tools):
		return no("tools", "the model cannot call tools here")
	case nonEmpty(q.Format) && !isString(q.Format, ""):
		return no("format", "only free text is produced (no JSON mode or schema)")
	case nonEmpty(q.Think) && string(q.Think) != "false":
		return no("think", "the model does not think on request")
	case nonEmpty(q.Images):
		return no("images", "the models here read text only")
	case q.Suffix != "":
		return no("suffix", "text after the completion (fill in the middle) is not supported")
	case q.Template != "":
		return no("template", "the model's own chat template is used")
	}
	for i, m := range q.Messages {
		if nonEmpty(m.Images) {
			return no(fmt.Sprintf("messages[%d].images", i), "the models here read text only")
		}
	}
	return nil
}

// sampling turns options into the job's sampler, stops, length and
// context, with ollama's defaults.
func parseOptions(opts map[string]any, j *job) (numCtx int, e *apiError) {
	p := engine.SamplerParams{Temperature: 0.8, TopK: 40, TopP: 0.9, RepeatPenalty: 1.1, MirostatTau: 5, MirostatEta: 0.1, Seed: rand.Uint64()}
	j.maxTokens = -1
	num := func(k string) (float64, *apiError) {
		v, ok := opts[k].(float64)
		if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, invalid("options."+k, "invalid_type", "options.%s must be a number.", k)
		}
		return v, nil
	}
	for k, raw := range opts {
		if ignoredOptions[k] {
			continue
		}
		if want, ok := refusedUnless[k]; ok {
			if v, e := num(k); e != nil || v != want {
				return 0, invalid("options."+k, "unsupported_parameter", "options.%s is not supported by this server (only %v).", k, want)
			}
			continue
		}
		if _, ok := samplingOptions[k]; ok {
			if e := setSamplingOption(&p, k, raw); e != nil {
				return 0, e
			}
			continue
		}
		if k == "stop" {
			list, ok := raw.([]any)
			if !ok {
				return 0, invalid("options.stop", "invalid_type", "options.stop must be an array of strings.")
			}
			for _, x := range list {
				str, ok := x.(string)
				if !ok {
					return 0, invalid("options.stop", "invalid_type", "options.stop must be an array of strings.")
				}
				if str != "" {
					j.stops = append(j.stops, str)
				}
			}
			continue
		}
		v, e := num(k)
		if e != nil {
			if _, known := map[string]bool{"num_predict": true, "temperature": true, "top_p": true, "top_k": true, "min_p": true,
				"seed": true, "num_ctx": true, "repeat_penalty": true}[k]; !known {
				return 0, invalid("options."+k, "unsupported_parameter", "options.%s is not an option this server knows.", k)
			}
			return 0, e
		}
		switch k {
		case "num_predict":
			j.maxTokens = int(v)
		case "num_ctx":
			numCtx = int(v)
		default:
			if !runner.SetSamplerOption(&p, k, v) {
				return 0, invalid("options."+k, "unsupported_parameter", "options.%s is not an option this server knows.", k)
			}
		}
	}
	penaltyWindow(&p, opts)
	if p.TopP >= 1 {
		p.TopP = 1
	}
	if err := p.Validate(); err != nil {
		return 0, invalid("options", "", "%v", err)
	}
	j.sampler = p
	return numCtx, nil
}

// limit fits the job to the context: num_ctx (when smaller than the
// loaded model's), then num_predict (-1: until the context is full).
func limit(j *job, ctx, numCtx int) *apiError {
	if numCtx > 0 {
		if numCtx > ctx {
			return invalid("options.num_ctx", "", "options.num_ctx %d is more than the %d tokens this server loads the model with (serve --ctx).", numCtx, ctx)
		}
		ctx = numCtx
	}
	if len(j.prompt) == 0 {
		return invalid("prompt", "", "The prompt is empty.")
	}
	if len(j.prompt) >= ctx {
		return invalid("prompt", "context_length_exceeded", "The prompt has %d tokens; the context holds %d.", len(j.prompt), ctx)
	}
	room := ctx - len(j.prompt)
	if j.maxTokens <= 0 || j.maxTokens > room {
		j.maxTokens = room
	}
	return nil
}

// prepare parses an ollama request and leases its model; on failure the
// error is answered and ok is false.
func (s *Server) prepareOllama(w http.ResponseWriter, r *http.Request, chatMode bool) (*ollamaRequest, *job, *runner.Lease, time.Duration, bool) {
	start := time.Now()
	var q ollamaRequest
	if e := decodeBody(r, &q); e != nil {
		ollamaError(w, e)
		return nil, nil, nil, 0, false
	}
	if _, ok := s.fleet.Lookup(q.Model); !ok {
		ollamaError(w, s.unknownModel(q.Model))
		return nil, nil, nil, 0, false
	}
	if s.unloadOnly(w, &q, chatMode) {
		return nil, nil, nil, 0, false
	}
	if e := q.refuse(); e != nil {
		ollamaError(w, e)
		return nil, nil, nil, 0, false
	}
	if e := checkIntegers(q.Options); e != nil {
		ollamaError(w, e)
		return nil, nil, nil, 0, false
	}
	j := &job{chat: chatMode, stream: q.Stream == nil || *q.Stream}
	var e *apiError
	if j.numCtx, e = parseOptions(q.Options, j); e != nil {
		ollamaError(w, e)
		return nil, nil, nil, 0, false
	}
	s.modelParams(q.Model).Apply(&j.sampler, &j.stops, &j.maxTokens, ollamaSets(q.Options))
	lease, ok := s.lease(&ollamaErrors{ResponseWriter: w}, r, q.Model)
	if !ok {
		return nil, nil, nil, 0, false
	}
	j.lease = lease
	return &q, j, lease, time.Since(start), true
}
