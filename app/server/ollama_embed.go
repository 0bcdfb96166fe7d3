package server

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"time"

	"dovetail/app/runner"
)

// ollamaEmbedRequest is /api/embed's body, and /api/embeddings' (prompt).
type ollamaEmbedRequest struct {
	Model      string          `json:"model"`
	Input      json.RawMessage `json:"input"`
	Prompt     string          `json:"prompt"`
	Truncate   *bool           `json:"truncate"`
	Dimensions int64           `json:"dimensions"`
	KeepAlive  ollamaDuration  `json:"keep_alive"`
	// Options: num_ctx bounds the input as it bounds a prompt; the
	// others say how to sample and mean nothing here (ollama takes them
	// too).
	Options map[string]any `json:"options"`
}

type ollamaEmbedResponse struct {
	Model           string      `json:"model"`
	Embeddings      [][]float32 `json:"embeddings"`
	TotalDuration   int64       `json:"total_duration"`
	LoadDuration    int64       `json:"load_duration"`
	PromptEvalCount int         `json:"prompt_eval_count"`
}

// handleOllamaEmbed answers ollama's /api/embed: a string or an array of
// them, cut to the context unless truncate is false, the vectors cut to
// dimensions (and made unit length again) when asked.
func (s *Server) handleOllamaEmbed(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	q, ok := s.decodeOllamaEmbed(w, r)
	if !ok {
		return
	}
	texts, array, e := ollamaInputs(q.Input)
	if e != nil {
		ollamaError(w, e)
		return
	}
	if len(texts) == 0 && q.KeepAlive.set && q.KeepAlive.d == 0 {
		// ollama's way to unload, as with an empty prompt: nothing loaded
		if e, ok := s.expire(w, q.Model); ok {
			writeJSON(w, http.StatusOK, ollamaEmbedResponse{Model: s.fleet.Tagged(e), Embeddings: [][]float32{}})
		}
		return
	}
	name := func(i int) string {
		if array {
			return fmt.Sprintf("input[%d]", i)
		}
		return "input"
	}
	j, ok := s.prepareEmbed(w, r, q, texts, name)
	if !ok {
		return
	}
	defer j.lease.Release(q.KeepAlive.d, q.KeepAlive.set)
	load := time.Since(start)
	if q.Dimensions != 0 {
		if j.dims, e = checkDims("dimensions", q.Dimensions, j.lease.Model().Config().Hidden); e != nil {
			ollamaError(w, e)
			return
		}
	}
	out := ollamaEmbedResponse{Model: j.lease.Entry().Name, Embeddings: [][]float32{}}
	if len(j.inputs) > 0 {
		vecs, tokens, ok := s.runEmbed(&ollamaErrors{ResponseWriter: w}, r, j)
		if !ok {
			return
		}
		out.Embeddings, out.PromptEvalCount = vecs, tokens
	}
	out.TotalDuration, out.LoadDuration = since(start), load.Nanoseconds()
	writeJSON(w, http.StatusOK, out)
}

// handleOllamaEmbeddings answers ollama's older /api/embeddings: one
// prompt, one vector (unit length, as /api/embed's: ollama's own leaves
// this one as the model gives it).
func (s *Server) handleOllamaEmbeddings(w http.ResponseWriter, r *http.Request) {
	q, ok := s.decodeOllamaEmbed(w, r)
	if !ok {
		return
	}
	var texts []string
	if q.Prompt != "" {
		texts = []string{q.Prompt}
	}
	j, ok := s.prepareEmbed(w, r, q, texts, func(int) string { return "prompt" })
	if !ok {
		return
	}
	defer j.lease.Release(q.KeepAlive.d, q.KeepAlive.set)
	out := struct {
		Embedding []float32 `json:"embedding"`
	}{Embedding: []float32{}}
	if len(j.inputs) > 0 {
		vecs, _, ok := s.runEmbed(&ollamaErrors{ResponseWriter: w}, r, j)
		if !ok {
			return
		}
		out.Embedding = vecs[0]
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) decodeOllamaEmbed(w http.ResponseWriter, r *http.Request) (*ollamaEmbedRequest, bool) {
	var q ollamaEmbedRequest
	if e := decodeBody(r, &q); e != nil {
		ollamaError(w, e)
		return nil, false
	}
	if _, ok := s.fleet.Lookup(q.Model); !ok {
		ollamaError(w, s.unknownModel(q.Model))
		return nil, false
	}
	return &q, true
}

// ollamaInputs reads /api/embed's input: a string or an array of strings
// (array says which). An empty string is no input (ollama's way to load
// the model); an empty string in an array is an input.
func ollamaInputs(raw json.RawMessage) (texts []string, array bool, e *apiError) {
	if isNull(raw) {
		return nil, false, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, false, nil
		}
		return []string{one}, false, nil
	}
	if err := json.Unmarshal(raw, &texts); err != nil {
		return nil, false, invalid("input", "invalid_type", "input must be a string or an array of strings.")
	}
	if len(texts) > maxEmbedInputs {
		return nil, false, invalid("input", "", "input may hold at most %d strings, got %d.", maxEmbedInputs, len(texts))
	}
	return texts, true, nil
}

// prepareEmbed leases the model and tokenizes texts within its context
// (options.num_ctx when smaller): cut to it unless truncate is false, as
// ollama does. On failure the error is answered and ok is false.
func (s *Server) prepareEmbed(w http.ResponseWriter, r *http.Request, q *ollamaEmbedRequest, texts []string, name func(int) string) (*embedJob, bool) {
	numCtx, e := embedNumCtx(q.Options)
	if e != nil {
		ollamaError(w, e)
		return nil, false
	}
	lease, ok := s.lease(&ollamaErrors{ResponseWriter: w}, r, q.Model)
	if !ok {
		return nil, false
	}
	j := &embedJob{lease: lease}
	if e := j.tokenize(texts, numCtx, q.Truncate == nil || *q.Truncate, name); e != nil {
		lease.Release(q.KeepAlive.d, q.KeepAlive.set)
		ollamaError(w, e)
		return nil, false
	}
	return j, true
}

// tokenize fills j.inputs with texts' tokens, each at most the context
// (numCtx when smaller and set): longer ones are cut, keeping the EOS the
// tokenizer adds, or refused when truncate is false. name(i) is text i's
// field.
func (j *embedJob) tokenize(texts []string, numCtx int, truncate bool, name func(int) string) *apiError {
	m := j.lease.Model()
	ctx := j.lease.Runner().Context()
	if numCtx > ctx {
		return invalid("options.num_ctx", "", "options.num_ctx %d is more than the %d tokens this server loads the model with (serve --ctx).", numCtx, ctx)
	}
	if numCtx > 0 {
		ctx = numCtx
	}
	for i, t := range texts {
		p := name(i)
		toks := m.EmbedTokens(t)
		switch {
		case len(toks) == 0:
			return invalid(p, "", "%s has no tokens.", p)
		case len(toks) > ctx && !truncate:
			return invalid(p, "context_length_exceeded", "%s has %d tokens, more than the context of %d, and truncate is false.", p, len(toks), ctx)
		case len(toks) > ctx:
			toks = cut(m, toks, ctx)
		}
		j.inputs = append(j.inputs, toks)
	}
	return nil
}

// cut keeps the first n tokens, the last being the EOS where the
// tokenizer adds one.
func cut(m *runner.Model, toks []int, n int) []int {
	out := toks[:n:n]
	if m.Tok.AddEOS() && n > 1 {
		out[n-1] = toks[len(toks)-1]
	}
	return out
}

// embedNumCtx reads options.num_ctx (0: absent), and nothing else of the
// options.
func embedNumCtx(opts map[string]any) (int, *apiError) {
	raw, ok := opts["num_ctx"]
	if !ok || raw == nil {
		return 0, nil
	}
	v, ok := raw.(float64)
	if !ok || v != math.Trunc(v) || v < 1 || v > math.MaxInt32 {
		return 0, invalid("options.num_ctx", "invalid_type", "options.num_ctx must be a positive whole number.")
	}
	return int(v), nil
}
