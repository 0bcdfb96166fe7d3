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
// A request from any other page is refused outright (gate), as a form or
// text/plain POST needs no preflight.
type corsPolicy struct {
	any      bool
	patterns []originPattern
}

// originPattern is scheme://host with a port, any port ("*"), or none
// (""); host "*" is any host, "*.example" any of its subdomains.
type originPattern struct{ scheme, host, port string }

// defaultOrigins are ollama's (OLLAMA_ORIGINS adds to the same list):
// pages on this machine, any port, and the shells of desktop apps and
// editors' webviews, whose pages are no web site's.
var defaultOrigins = []string{
	"http://localhost", "https://localhost", "http://localhost:*", "https://localhost:*",
	"http://127.0.0.1", "https://127.0.0.1", "http://127.0.0.1:*", "https://127.0.0.1:*",
	"http://0.0.0.0", "https://0.0.0.0", "http://0.0.0.0:*", "https://0.0.0.0:*",
	"http://[::1]", "https://[::1]", "http://[::1]:*", "https://[::1]:*",
	"app://*", "file://*", "tauri://*", "vscode-webview://*", "vscode-file://*",
}

// newCORS allows the default origins and those extra names.
func newCORS(extra []string) (corsPolicy, error) {
	var c corsPolicy
	for _, o := range append(append([]string{}, defaultOrigins...), extra...) {
		if o == "*" {
			c.any = true
			continue
		}
		p, ok := parseOrigin(o)
		if !ok {
			return c, fmt.Errorf("CORS origin %q: want scheme://host[:port], with * for any port, *.domain for its subdomains, or *", o)
		}
		c.patterns = append(c.patterns, p)
	}
	return c, nil
}

func parseOrigin(o string) (originPattern, bool) {
	scheme, rest, ok := strings.Cut(strings.TrimSuffix(o, "/"), "://")
	if !ok || scheme == "" || rest == "" || strings.ContainsAny(rest, "/?#@") {
		return originPattern{}, false
	}
	host, port := rest, ""
	if i := strings.LastIndexByte(rest, ':'); i > strings.LastIndexByte(rest, ']') {
		host, port = rest[:i], rest[i+1:]
		if port == "" || port != "*" && strings.Trim(port, "0123456789") != "" {
			return originPattern{}, false
		}
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "*" && port == "" {
		port = "*" // "app://*": every page of the scheme
	}
	if host == "" || strings.Contains(strings.TrimPrefix(host, "*."), "*") && host != "*" {
		return originPattern{}, false
	}
	return originPattern{scheme: strings.ToLower(scheme), host: strings.ToLower(host), port: port}, true
}

// allows reports whether a page of origin may call the API.
func (c corsPolicy) allows(origin string) bool {
	if c.any {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return false
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	for _, p := range c.patterns {
		if p.scheme == scheme && p.matchesHost(host) && (p.port == "*" || p.port == port) {
			return true
		}
	}
	return false
}

func (p originPattern) matchesHost(host string) bool {
	if sub, ok := strings.CutPrefix(p.host, "*."); ok {
		return strings.HasSuffix(host, "."+sub)
	}
	return p.host == "*" || p.host == host
}

// handle sets the CORS headers for an allowed origin, and answers a
// preflight itself (true: done).
func (c corsPolicy) handle(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	h := w.Header()
	h.Add("Vary", "Origin")
	allowed := origin != "" && c.allows(origin)
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
