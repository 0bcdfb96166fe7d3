package server

import (
	"encoding/json"
	"fmt"
	"net/http"
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
		"/api/version":  {method: http.MethodGet, handler: s.handleVersion},
		"/api/ps":       {method: http.MethodGet, handler: s.handlePS},
		"/api/embed":    {method: http.MethodPost, handler: s.handleOllamaEmbed}, "/api/embeddings": {method: http.MethodPost, handler: s.handleOllamaEmbeddings},
		"/api/pull": {method: http.MethodPost, handler: s.handlePull}, "/api/delete": {method: http.MethodDelete, handler: s.handleDelete},
		"/api/copy": {method: http.MethodPost, handler: s.handleCopy},
		// ollama's clients check that the server is up here.
		"/": {method: http.MethodGet, handler: func(w http.ResponseWriter, r *http.Request) {
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

// ollamaOptions are the options a request may set. Options that only say
// how ollama would run the model (threads, GPU layers, batch) change no
// text and are taken without effect; options that would change the text
// but are not implemented are refused by name.
var (
	ignoredOptions = map[string]bool{"num_thread": true, "num_gpu": true, "main_gpu": true, "num_batch": true, "use_mmap": true,
		"use_mlock": true, "numa": true, "low_vram": true, "f16_kv": true, "vocab_only": true, "num_keep": true, "logits_all": true,
		// ollama deprecated it and ignores it too: a newline is penalized as any token is.
		"penalize_newline": true}
	// refusedUnless are options refused unless they hold the value that
	// changes nothing.
	refusedUnless = map[string]float64{"tfs_z": 1}
)

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
