package server

import (
	"encoding/json"
	"net/http"
)

// sseWriter sends server-sent events the way OpenAI streams: one
// "data: JSON" event per chunk and a final "data: [DONE]". Each event is
// flushed at once, since a token held in a buffer is latency the user sees.
type sseWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func startSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no") // reverse proxies must not buffer tokens either
	w.WriteHeader(http.StatusOK)
	s := &sseWriter{w: w, rc: http.NewResponseController(w)}
	s.rc.Flush()
	return s
}

// send writes one event; an error means the client is gone.
func (s *sseWriter) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.raw(b)
}

func (s *sseWriter) raw(b []byte) error {
	buf := make([]byte, 0, len(b)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, b...)
	buf = append(buf, "\n\n"...)
	if _, err := s.w.Write(buf); err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sseWriter) done() error { return s.raw([]byte("[DONE]")) }
