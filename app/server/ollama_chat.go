package server

import (
	"fmt"
	"net/http"
	"time"

	"dovetail/models/chat"
)

// handleOllamaChat answers ollama's /api/chat: a conversation rendered
// with the model's chat template.
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
		writeJSON(w, http.StatusOK, ollamaChunk{Model: s.fleet.Tagged(lease.Entry()), CreatedAt: time.Now().UTC(),
			Message: &ollamaMessage{Role: "assistant"}, ollamaDone: ollamaDone{Done: true, DoneReason: "load"}})
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
	resp := &ollamaResponder{model: s.fleet.Tagged(lease.Entry()), chat: true, start: start, load: load}
	s.executeOllama(w, r, j, resp)
}
