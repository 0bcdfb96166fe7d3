package server

import (
	"net/http"
	"time"

	"dovetail/models/chat"
)

// handleGenerate answers ollama's /api/generate: a prompt, raw or
// templated, continued from the context tokens of an earlier answer.
func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	q, j, lease, load, ok := s.prepareOllama(w, r, false)
	if !ok {
		return
	}
	defer lease.Release(q.KeepAlive.d, q.KeepAlive.set)
	m := lease.Model()
	if q.Prompt == "" && len(q.Context) == 0 {
		// ollama's way to load a model (unloadOnly answers keep_alive 0).
		empty := ""
		writeJSON(w, http.StatusOK, ollamaChunk{Model: s.fleet.Tagged(lease.Entry()), CreatedAt: time.Now().UTC(), Response: &empty,
			ollamaDone: ollamaDone{Done: true, DoneReason: "load"}})
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
	resp := &ollamaResponder{model: s.fleet.Tagged(lease.Entry()), start: start, load: load, prompt: j.prompt}
	j.onToken = func(id int) { resp.generated = append(resp.generated, id) }
	s.executeOllama(w, r, j, resp)
}
