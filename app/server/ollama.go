package server

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"time"

	"dovetail/app/runner"
	"dovetail/app/runner/discover"
	"dovetail/engine"
	"dovetail/models/chat"
)

// ollama's API, beside OpenAI's: what its official libraries, Open WebUI and
// editors' plugins call. Errors are {"error": "…"}; streams are
// newline-delimited JSON, true by default.

// ollamaVersion is the version /api/version reports: Dovetail's.
const ollamaVersion = "0.8.0"

func (s *Server) ollamaRoutes() {
	for path, rt := range map[string]route{
		"/api/tags":     {method: http.MethodGet, handler: s.handleTags},
		"/api/show":     {method: http.MethodPost, handler: s.handleShow},
		"/api/chat":     {method: http.MethodPost, handler: s.handleOllamaChat},
		"/api/generate": {method: http.MethodPost, handler: s.handleGenerate},
		"/api/version":  {method: http.MethodGet, handler: s.handleVersion, public: true},
		"/api/ps":       {method: http.MethodGet, handler: s.handlePS},
		// ollama's clients check that the server is up here.
		"/": {method: http.MethodGet, public: true, handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprint(w, "Ollama is running (Dovetail, speaking ollama's API)")
		}},
	} {
		s.mux[path] = rt
	}
}

// ollamaError writes {"error": message} with the status of e.
func ollamaError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.Status, map[string]string{"error": e.Message})
}

// ndjson streams newline-delimited JSON objects, each flushed at once.
type ndjson struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startNDJSON(w http.ResponseWriter) *ndjson {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	return &ndjson{w: w, rc: http.NewResponseController(w)}
}

func (n *ndjson) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := n.w.Write(append(b, '\n')); err != nil {
		return err
	}
	return n.rc.Flush()
}

func (n *ndjson) done() error { return nil }

// ollamaDetails is ollama's ModelDetails.
type ollamaDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

func detailsOf(d runner.Description) ollamaDetails {
	return ollamaDetails{Format: "gguf", Family: d.Arch, Families: []string{d.Arch}, ParameterSize: runner.ParamSize(d.Params),
		QuantizationLevel: d.Quantization}
}

type ollamaModel struct {
	Name       string        `json:"name"`
	Model      string        `json:"model"`
	ModifiedAt time.Time     `json:"modified_at"`
	Size       int64         `json:"size"`
	Digest     string        `json:"digest"`
	Details    ollamaDetails `json:"details"`
}

// describe reads an entry's header; a file that does not read is left out
// of lists (and fails when a request names it).
func describe(e discover.Model) (runner.Description, bool) {
	d, err := runner.Describe(e.Path)
	if err != nil {
		return d, false
	}
	if e.Size > 0 {
		d.Size = e.Size
	}
	return d, true
}

func (s *Server) handleTags(w http.ResponseWriter, r *http.Request) {
	out := struct {
		Models []ollamaModel `json:"models"`
	}{Models: []ollamaModel{}}
	for _, e := range s.fleet.Entries() {
		if d, ok := describe(e); ok {
			out.Models = append(out.Models, ollamaModel{Name: e.Name, Model: e.Name, ModifiedAt: d.Modified, Size: d.Size,
				Digest: d.Fingerprint, Details: detailsOf(d)})
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleShow(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string `json:"model"`
		Name  string `json:"name"` // the older field
	}
	if e := decodeBody(r, &req); e != nil {
		ollamaError(w, e)
		return
	}
	if req.Model == "" {
		req.Model = req.Name
	}
	e, ok := s.fleet.Lookup(req.Model)
	if !ok {
		ollamaError(w, s.unknownModel(req.Model))
		return
	}
	d, ok := describe(e)
	if !ok {
		ollamaError(w, serverError(fmt.Errorf("the model %s cannot be read", e.Name)))
		return
	}
	info := map[string]any{"general.architecture": d.Arch, "general.parameter_count": d.Params, "general.name": d.Name,
		d.Arch + ".context_length": d.ContextLength, d.Arch + ".embedding_length": d.Hidden, d.Arch + ".block_count": d.Layers,
		d.Arch + ".attention.head_count": d.Heads, d.Arch + ".attention.head_count_kv": d.KVHeads,
		d.Arch + ".feed_forward_length": d.FFN, d.Arch + ".vocab_size": d.Vocab}
	from := e.Path
	if from == "" {
		from = "(the embedded model)"
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"license": d.License, "modelfile": "FROM " + from + "\n", "template": d.ChatTemplate,
		"parameters": fmt.Sprintf("num_ctx %d", d.ContextLength), "details": detailsOf(d), "model_info": info,
		"capabilities": []string{"completion"}, "modified_at": d.Modified})
}

func (s *Server) handleVersion(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"version": ollamaVersion})
}

func (s *Server) handlePS(w http.ResponseWriter, r *http.Request) {
	type running struct {
		ollamaModel
		ExpiresAt     time.Time `json:"expires_at"`
		SizeVRAM      uint64    `json:"size_vram"`
		ContextLength int       `json:"context_length"`
	}
	out := struct {
		Models []running `json:"models"`
	}{Models: []running{}}
	for _, res := range s.fleet.Loaded() {
		d, _ := describe(res.Entry)
		b := res.Runner.Budget()
		expires := res.Expires
		if expires.IsZero() {
			expires = time.Now().Add(24 * time.Hour * 365)
		}
		out.Models = append(out.Models, running{ollamaModel: ollamaModel{Name: res.Entry.Name, Model: res.Entry.Name,
			ModifiedAt: d.Modified, Size: int64(b.CPU() + b.GPU()), Digest: d.Fingerprint, Details: detailsOf(d)},
			ExpiresAt: expires, SizeVRAM: b.GPU(), ContextLength: res.Runner.Context()})
	}
	writeJSON(w, http.StatusOK, out)
}

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

// ollamaOptions are the options a request may set. Options that only say
// how ollama would run the model (threads, GPU layers, batch) change no
// text and are taken without effect; options that would change the text
// but are not implemented are refused by name.
var (
	ignoredOptions = map[string]bool{"num_thread": true, "num_gpu": true, "main_gpu": true, "num_batch": true, "use_mmap": true,
		"use_mlock": true, "numa": true, "low_vram": true, "f16_kv": true, "vocab_only": true, "num_keep": true}
	// refusedUnless are options refused unless they hold the value that
	// changes nothing.
	refusedUnless = map[string]float64{"typical_p": 1, "tfs_z": 1, "presence_penalty": 0, "frequency_penalty": 0, "mirostat": 0}
)

// sampling turns options into the job's sampler, stops, length and
// context, with ollama's defaults.
func parseOptions(opts map[string]any, j *job) (numCtx int, e *apiError) {
	p := engine.SamplerParams{Temperature: 0.8, TopK: 40, TopP: 0.9, RepeatPenalty: 1.1, Seed: rand.Uint64()}
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
				"seed": true, "num_ctx": true, "repeat_penalty": true, "repeat_last_n": true}[k]; !known {
				return 0, invalid("options."+k, "unsupported_parameter", "options.%s is not an option this server knows.", k)
			}
			return 0, e
		}
		switch k {
		case "num_predict":
			j.maxTokens = int(v)
		case "temperature":
			p.Temperature = float32(v)
		case "top_p":
			p.TopP = float32(v)
		case "top_k":
			p.TopK = int(v)
		case "min_p":
			p.MinP = float32(v)
		case "seed":
			if v >= 0 {
				p.Seed = uint64(v)
			}
		case "num_ctx":
			numCtx = int(v)
		case "repeat_penalty":
			p.RepeatPenalty = float32(v)
		case "repeat_last_n":
			if v != 64 && v != 0 && v != -1 {
				return 0, invalid("options.repeat_last_n", "unsupported_parameter", "options.repeat_last_n must be 64 here (the penalty looks at the last 64 tokens), or 0 to turn it off.")
			}
			if v == 0 {
				p.RepeatPenalty = 1
			}
		default:
			return 0, invalid("options."+k, "unsupported_parameter", "options.%s is not an option this server knows.", k)
		}
	}
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

// ollamaDone is a final object's fields.
type ollamaDone struct {
	Done               bool       `json:"done"`
	DoneReason         string     `json:"done_reason,omitempty"`
	TotalDuration      int64      `json:"total_duration,omitempty"`
	LoadDuration       int64      `json:"load_duration,omitempty"`
	PromptEvalCount    int        `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration int64      `json:"prompt_eval_duration,omitempty"`
	EvalCount          int        `json:"eval_count,omitempty"`
	EvalDuration       int64      `json:"eval_duration,omitempty"`
	Dovetail           *statsInfo `json:"dovetail,omitempty"`
}

type ollamaMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ollamaChunk is /api/chat's object (Message) and /api/generate's
// (Response, Context).
type ollamaChunk struct {
	Model     string         `json:"model"`
	CreatedAt time.Time      `json:"created_at"`
	Message   *ollamaMessage `json:"message,omitempty"`
	Response  *string        `json:"response,omitempty"`
	Context   []int          `json:"context,omitempty"`
	Error     string         `json:"error,omitempty"`
	ollamaDone
}

// ollamaResponder answers /api/chat (chat true) and /api/generate.
type ollamaResponder struct {
	model     string
	chat      bool
	start     time.Time
	load      time.Duration
	prompt    []int
	generated []int // /api/generate's context: the tokens emitted
}

func (o *ollamaResponder) chunk(text string) ollamaChunk {
	c := ollamaChunk{Model: o.model, CreatedAt: time.Now().UTC()}
	if o.chat {
		c.Message = &ollamaMessage{Role: "assistant", Content: text}
	} else {
		c.Response = &text
	}
	return c
}

func (o *ollamaResponder) first() any { return nil }

func (o *ollamaResponder) delta(text string, _ []tokenLogprob) any { return o.chunk(text) }

func (o *ollamaResponder) last(finish string, st engine.Stats) any {
	c := o.chunk("")
	o.done(&c, finish, st)
	return c
}

func (o *ollamaResponder) done(c *ollamaChunk, finish string, st engine.Stats) {
	c.ollamaDone = ollamaDone{Done: true, DoneReason: finish, TotalDuration: since(o.start), LoadDuration: o.load.Nanoseconds(),
		PromptEvalCount: st.PromptTokens, PromptEvalDuration: st.PromptTime.Nanoseconds(), EvalCount: st.GenTokens,
		EvalDuration: st.GenTime.Nanoseconds(), Dovetail: statsOf(st)}
	if !o.chat {
		c.Context = append(append([]int{}, o.prompt...), o.generated...)
	}
}

func (o *ollamaResponder) usage(engine.Stats) any { return nil }

func (o *ollamaResponder) whole(text string, _ []tokenLogprob, finish string, st engine.Stats) any {
	c := o.chunk(text)
	o.done(&c, finish, st)
	return c
}

func (o *ollamaResponder) failed(e *apiError) any {
	c := o.chunk("")
	c.Error, c.Done = e.Message, true
	return c
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
	if e := q.refuse(); e != nil {
		ollamaError(w, e)
		return nil, nil, nil, 0, false
	}
	j := &job{chat: chatMode, stream: q.Stream == nil || *q.Stream}
	var e *apiError
	if j.numCtx, e = parseOptions(q.Options, j); e != nil {
		ollamaError(w, e)
		return nil, nil, nil, 0, false
	}
	lease, ok := s.lease(&ollamaErrors{ResponseWriter: w}, r, q.Model)
	if !ok {
		return nil, nil, nil, 0, false
	}
	j.lease = lease
	return &q, j, lease, time.Since(start), true
}

func (s *Server) handleOllamaChat(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	q, j, lease, load, ok := s.prepareOllama(w, r, true)
	if !ok {
		return
	}
	defer lease.Release(q.KeepAlive.d, q.KeepAlive.set)
	msgs := make([]chat.Message, 0, len(q.Messages))
	for i, m := range q.Messages {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			ollamaError(w, invalid(fmt.Sprintf("messages[%d].role", i), "", "Invalid role '%s': expected system, user, assistant or tool.", m.Role))
			return
		}
		msgs = append(msgs, chat.Message{Role: m.Role, Content: m.Content})
	}
	if len(msgs) == 0 {
		// ollama's way to load a model: an empty chat.
		writeJSON(w, http.StatusOK, ollamaChunk{Model: lease.Entry().Name, CreatedAt: time.Now().UTC(),
			Message: &ollamaMessage{Role: "assistant"}, ollamaDone: ollamaDone{Done: true, DoneReason: loadReason(q)}})
		return
	}
	var e *apiError
	if j.prompt, e = chatPrompt(lease.Model(), msgs); e != nil {
		ollamaError(w, e)
		return
	}
	if e := limit(j, lease.Runner().Context(), j.numCtx); e != nil {
		ollamaError(w, e)
		return
	}
	resp := &ollamaResponder{model: lease.Entry().Name, chat: true, start: start, load: load}
	s.executeOllama(w, r, j, resp)
}

func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	q, j, lease, load, ok := s.prepareOllama(w, r, false)
	if !ok {
		return
	}
	defer lease.Release(q.KeepAlive.d, q.KeepAlive.set)
	m := lease.Model()
	if q.Prompt == "" && len(q.Context) == 0 {
		// ollama's way to load (or, with keep_alive 0, unload) a model.
		empty := ""
		writeJSON(w, http.StatusOK, ollamaChunk{Model: lease.Entry().Name, CreatedAt: time.Now().UTC(), Response: &empty,
			ollamaDone: ollamaDone{Done: true, DoneReason: loadReason(q)}})
		return
	}
	var prompt []int
	switch {
	case q.Raw:
		prompt = m.Tok.Encode(q.Prompt, len(q.Context) == 0, false)
	default:
		var msgs []chat.Message
		if q.System != "" {
			msgs = append(msgs, chat.Message{Role: "system", Content: q.System})
		}
		msgs = append(msgs, chat.Message{Role: "user", Content: q.Prompt})
		var e *apiError
		if prompt, e = chatPrompt(m, msgs); e != nil {
			ollamaError(w, e)
			return
		}
	}
	for _, id := range q.Context {
		if id < 0 || id >= m.Tok.VocabSize() {
			ollamaError(w, invalid("context", "", "Token id %d is outside the vocabulary [0, %d).", id, m.Tok.VocabSize()))
			return
		}
	}
	j.prompt = append(append([]int{}, q.Context...), prompt...)
	if e := limit(j, lease.Runner().Context(), j.numCtx); e != nil {
		ollamaError(w, e)
		return
	}
	resp := &ollamaResponder{model: lease.Entry().Name, start: start, load: load, prompt: j.prompt}
	j.onToken = func(id int) { resp.generated = append(resp.generated, id) }
	s.executeOllama(w, r, j, resp)
}

// loadReason is an empty request's done_reason: "load", or "unload" when
// its keep_alive unloads the model at once.
func loadReason(q *ollamaRequest) string {
	if q.KeepAlive.set && q.KeepAlive.d == 0 {
		return "unload"
	}
	return "load"
}

// executeOllama runs a job as ollama answers: NDJSON, errors as
// {"error"}.
func (s *Server) executeOllama(w http.ResponseWriter, r *http.Request, j *job, resp *ollamaResponder) {
	ew := &ollamaErrors{ResponseWriter: w}
	s.execute(ew, r, j, resp, func() stream { return startNDJSON(w) })
}

// ollamaErrors rewrites the OpenAI error bodies execute writes into
// ollama's {"error": "…"}.
type ollamaErrors struct {
	http.ResponseWriter
	status int
}

func (o *ollamaErrors) WriteHeader(code int) {
	o.status = code
	o.ResponseWriter.WriteHeader(code)
}

func (o *ollamaErrors) Write(b []byte) (int, error) {
	if o.status >= 400 {
		var eb errorBody
		if json.Unmarshal(b, &eb) == nil && eb.Error != nil {
			out, _ := json.Marshal(map[string]string{"error": eb.Error.Message})
			if _, err := o.ResponseWriter.Write(append(out, '\n')); err != nil {
				return 0, err
			}
			return len(b), nil
		}
	}
	return o.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's Flush.
func (o *ollamaErrors) Unwrap() http.ResponseWriter { return o.ResponseWriter }
