package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// corsPolicy lets web pages of the allowed origins call the API: a
// browser asks first (a preflight OPTIONS), then sends the request with
// its Origin, and reads the answer only when the server names that origin.
type corsPolicy struct {
	any      bool
	patterns []originPattern
}

// originPattern is scheme://host with a port or any port ("*").
type originPattern struct{ scheme, host, port string }

// defaultOrigins are pages on this machine, any port: a front end in
// development, a local web UI.
var defaultOrigins = []string{"http://localhost:*", "http://127.0.0.1:*"}

func newCORS(origins []string) (corsPolicy, error) {
	if origins == nil {
		origins = defaultOrigins
	}
	var c corsPolicy
	for _, o := range origins {
		if o == "*" {
			c.any = true
			continue
		}
		scheme, rest, ok := strings.Cut(strings.TrimSuffix(o, "/"), "://")
		host, port, _ := strings.Cut(rest, ":")
		if !ok || scheme == "" || host == "" || strings.ContainsAny(rest, "/?#@") || strings.Trim(port, "0123456789") != "" && port != "*" {
			return c, fmt.Errorf("CORS origin %q: want scheme://host[:port], with * for any port, or *", o)
		}
		c.patterns = append(c.patterns, originPattern{scheme: scheme, host: strings.ToLower(host), port: port})
	}
	return c, nil
}

// allows reports whether a page of origin may read the answers.
func (c corsPolicy) allows(origin string) bool {
	if origin == "" {
		return false
	}
	if c.any {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	for _, p := range c.patterns {
		if p.scheme == u.Scheme && p.host == host && (p.port == "*" || p.port == port) {
			return true
		}
	}
	return false
}

// handle sets the CORS headers for an allowed origin, and answers a
// preflight itself (true: done).
func (c corsPolicy) handle(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	h := w.Header()
	h.Add("Vary", "Origin")
	allowed := c.allows(origin)
	if allowed {
		if c.any {
			h.Set("Access-Control-Allow-Origin", "*")
		} else {
			h.Set("Access-Control-Allow-Origin", origin)
		}
		h.Set("Access-Control-Expose-Headers", "Content-Type")
	}
	if r.Method != http.MethodOptions || r.Header.Get("Access-Control-Request-Method") == "" {
		return false
	}
	if !allowed {
		w.WriteHeader(http.StatusForbidden)
		return true
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, HEAD, OPTIONS")
	// Whatever headers the page's client library sends (OpenAI's sends
	// several of its own): the answer is the page's to read either way.
	allow := "Authorization, Content-Type"
	if req := r.Header.Get("Access-Control-Request-Headers"); req != "" {
		allow = req
	}
	h.Set("Access-Control-Allow-Headers", allow)
	h.Set("Access-Control-Max-Age", "600")
	w.WriteHeader(http.StatusNoContent)
	return true
}
