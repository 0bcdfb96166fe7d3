package server

import (
	"crypto/subtle"
	"net/http"
	"strings"
)

// authorized checks the API key, on every route but /health: the scheme
// of "Authorization: Bearer KEY" is case-insensitive, as every HTTP
// authentication scheme is (RFC 9110, 11.1).
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	scheme, key, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	return ok && strings.EqualFold(scheme, "Bearer") &&
		subtle.ConstantTimeCompare([]byte(strings.TrimSpace(key)), []byte(s.cfg.APIKey)) == 1
}
