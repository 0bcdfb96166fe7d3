package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// apiError is an error as OpenAI reports it, so that clients written for
// OpenAI show the message instead of failing to parse the body.
type apiError struct {
	Status  int    `json:"-"`
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"` // string or null
	Code    any    `json:"code"`  // string or null
}

func (e *apiError) Error() string { return e.Message }

// errorBody is the envelope OpenAI wraps errors in.
type errorBody struct {
	Error *apiError `json:"error"`
}

func invalid(param, code, format string, args ...any) *apiError {
	e := &apiError{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...), Type: "invalid_request_error"}
	if param != "" {
		e.Param = param
	}
	if code != "" {
		e.Code = code
	}
	return e
}

func notFound(format string, args ...any) *apiError {
	return &apiError{Status: http.StatusNotFound, Message: fmt.Sprintf(format, args...), Type: "invalid_request_error", Code: "not_found"}
}

func serverError(err error) *apiError {
	return &apiError{Status: http.StatusInternalServerError, Message: err.Error(), Type: "server_error"}
}

var (
	errUnauthorized = &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key",
		Message: "Incorrect or missing API key: send it as 'Authorization: Bearer KEY' (every route but /health needs it)."}
	errQueueFull = &apiError{Status: http.StatusTooManyRequests, Type: "requests", Code: "rate_limit_exceeded",
		Message: "The server is busy: every generation slot is taken and the wait queue is full. Retry later."}
	errShuttingDown = &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: "shutting_down",
		Message: "The server is shutting down."}
)

func writeError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, e.Status, errorBody{Error: e})
}

// answerError writes e in the shape of the API that path belongs to:
// ollama's {"error": "…"} under /api/, OpenAI's elsewhere.
func answerError(w http.ResponseWriter, path string, e *apiError) {
	if path == "/api" || strings.HasPrefix(path, "/api/") {
		ollamaError(w, e)
		return
	}
	writeError(w, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"message":"response encoding failed","type":"server_error","param":null,"code":null}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
