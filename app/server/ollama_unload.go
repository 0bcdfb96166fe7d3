package server

import (
	"net/http"
	"time"

	"dovetail/app/runner/discover"
)

// unloadOnly answers a request with nothing to generate and keep_alive 0,
// ollama's way to unload a model (true: answered). The model unloads once
// its running requests are done; one that is not loaded is not loaded for
// it, and no other model is evicted (a script unloading every model of
// /api/tags loads none).
func (s *Server) unloadOnly(w http.ResponseWriter, q *ollamaRequest, chatMode bool) bool {
	empty := chatMode && len(q.Messages) == 0 || !chatMode && q.Prompt == "" && len(q.Context) == 0
	if !empty || !q.KeepAlive.set || q.KeepAlive.d != 0 {
		return false
	}
	e, ok := s.expire(w, q.Model)
	if !ok {
		return true
	}
	chunk := ollamaChunk{Model: s.fleet.Tagged(e), CreatedAt: time.Now().UTC(), ollamaDone: ollamaDone{Done: true, DoneReason: "unload"}}
	if chatMode {
		chunk.Message = &ollamaMessage{Role: "assistant"}
	} else {
		chunk.Response = new(string)
	}
	writeJSON(w, http.StatusOK, chunk)
	return true
}

// expire unloads the model named, never loading it (false: the model is
// unknown, answered).
func (s *Server) expire(w http.ResponseWriter, model string) (discover.Model, bool) {
	e, ok := s.fleet.Lookup(model)
	if !ok || s.fleet.Expire(e.Name) != nil {
		ollamaError(w, s.unknownModel(model))
		return e, false
	}
	return e, true
}
