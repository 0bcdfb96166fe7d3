package server_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"dovetail/app/cli"
	"dovetail/app/runner"
	"dovetail/app/server"
)

// request is one request as a browser or a script may send it: host
// replaces the Host header when not empty.
type request struct {
	method, path, body, host string
	header                   []string
}

// send answers the status, the body and the headers of req.
func send(t *testing.T, base string, req request) (int, string, http.Header) {
	t.Helper()
	r, err := http.NewRequest(req.method, base+req.path, strings.NewReader(req.body))
	if err != nil {
		t.Fatal(err)
	}
	if req.host != "" {
		r.Host = req.host
	}
	for i := 0; i+1 < len(req.header); i += 2 {
		r.Header.Set(req.header[i], req.header[i+1])
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

// errorShape checks a refusal's body: ollama's {"error": "…"} under /api/,
// OpenAI's {"error": {"message": …}} elsewhere.
func errorShape(t *testing.T, path, body, want string) {
	t.Helper()
	if strings.HasPrefix(path, "/api/") {
		var e struct{ Error string }
		unmarshal(t, []byte(body), &e)
		if e.Error == "" || !strings.Contains(e.Error, want) {
			t.Errorf("%s: %s is not ollama's error saying %q", path, body, want)
		}
		return
	}
	var e struct{ Error struct{ Message string } }
	unmarshal(t, []byte(body), &e)
	if !strings.Contains(e.Error.Message, want) {
		t.Errorf("%s: %s is not OpenAI's error saying %q", path, body, want)
	}
}

// A page of another site may not make the server generate: a form or
// text/plain POST needs no preflight, and is refused (403) before any work
// is done; /metrics counts no generation.
func TestBrowserFromOtherSiteRefused(t *testing.T) {
	ts := start(t, server.Config{})
	msgs := `"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":4`
	for _, req := range []request{
		{"POST", "/v1/chat/completions", `{` + msgs + `}`, "", []string{"Origin", "http://evil.example", "Content-Type", "text/plain"}},
		{"POST", "/api/generate", `{"model":"default","prompt":"Once","stream":false}`, "", []string{"Origin", "http://evil.example", "Content-Type", "text/plain"}},
		{"POST", "/api/chat", `{"model":"default",` + msgs + `}`, "", []string{"Origin", "https://evil.example:443", "Content-Type", "application/x-www-form-urlencoded"}},
		{"POST", "/v1/completions", `{"prompt":"Once","max_tokens":4}`, "", []string{"Origin", "null", "Content-Type", "text/plain"}},
		{"GET", "/v1/models", "", "", []string{"Origin", "http://localhost.evil.example"}},
		{"OPTIONS", "/v1/chat/completions", "", "", []string{"Origin", "http://evil.example", "Access-Control-Request-Method", "POST"}},
	} {
		code, body, h := send(t, ts.URL, req)
		if code != http.StatusForbidden || h.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s %s from %s: %d %v %s", req.method, req.path, req.header[1], code, h, body)
		}
		errorShape(t, req.path, body, "origin")
	}
	if n := metric(t, ts.URL, "dovetail_generated_tokens_total"); n != 0 {
		t.Errorf("%v tokens generated for refused pages", n)
	}
	if n := metric(t, ts.URL, "dovetail_prompt_tokens_total"); n != 0 {
		t.Errorf("%v prompt tokens read for refused pages", n)
	}
}

// DNS rebinding: a site that points its name at 127.0.0.1 reaches the
// server under its own name, which is refused (403) on every route; the
// loopback names and addresses are answered.
func TestRebindingHostRefused(t *testing.T) {
	ts := start(t, server.Config{})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(ts.URL, "http://"))
	for _, host := range []string{"evil.example", "evil.example:" + port, "127.0.0.1.evil.example:" + port, "localhost.evil.example"} {
		for _, req := range []request{
			{"GET", "/api/tags", "", host, nil},
			{"GET", "/health", "", host, nil},
			{"POST", "/v1/completions", `{"prompt":"Once","max_tokens":2}`, host, []string{"Origin", "http://" + host}},
			{"POST", "/api/generate", `{"model":"default","prompt":"Once","stream":false}`, host, nil},
		} {
			code, body, _ := send(t, ts.URL, req)
			if code != http.StatusForbidden {
				t.Errorf("Host %s, %s %s: %d %s", host, req.method, req.path, code, body)
			}
			errorShape(t, req.path, body, "--allow-host")
		}
	}
	for _, host := range []string{"localhost:" + port, "LOCALHOST", "app.localhost:" + port, "127.0.0.2:" + port, "[::1]:" + port, "localhost."} {
		if code, body, _ := send(t, ts.URL, request{"GET", "/api/tags", "", host, nil}); code != 200 {
			t.Errorf("Host %s: %d %s", host, code, body)
		}
	}
	if n := metric(t, ts.URL, "dovetail_generated_tokens_total"); n != 0 {
		t.Errorf("%v tokens generated for a rebinding page", n)
	}
}

// --allow-host names more hosts (* any); a name that is no host name is
// refused when the server starts.
func TestAllowHost(t *testing.T) {
	ts := start(t, server.Config{AllowedHosts: []string{"MyBox.lan", "10.0.0.5:11435"}})
	for host, want := range map[string]int{"mybox.lan": 200, "mybox.lan:8080": 200, "10.0.0.5": 200, "other.lan": 403, "box.mybox.lan": 403} {
		if code, body, _ := send(t, ts.URL, request{"GET", "/v1/models", "", host, nil}); code != want {
			t.Errorf("Host %s: %d %s, want %d", host, code, body, want)
		}
	}
	anyHost := start(t, server.Config{AllowedHosts: []string{"*"}})
	if code, body, _ := send(t, anyHost.URL, request{"GET", "/v1/models", "", "whatever.example", nil}); code != 200 {
		t.Errorf("with *: %d %s", code, body)
	}
	r, err := runner.New(tinyModel(t), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, bad := range []string{"http://mybox.lan/", "*.lan", "a b"} {
		if _, err := server.New(server.Config{Runner: r, AllowedHosts: []string{bad}}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("allowed host %q: %v", bad, err)
		}
	}
}

// A server listening beyond loopback is reached by whatever names the
// network gives it, and answers every Host (ollama's rule); the Origin
// check still holds.
func TestAnyHostBeyondLoopback(t *testing.T) {
	r, err := runner.New(tinyModel(t), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := server.New(server.Config{Runner: r, Queue: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	defer func() { cancel(); <-done }()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	base := "http://127.0.0.1:" + port
	if code, body, _ := send(t, base, request{"GET", "/v1/models", "", "gpu-box.lan:" + port, nil}); code != 200 {
		t.Errorf("Host gpu-box.lan: %d %s", code, body)
	}
	if code, body, _ := send(t, base, request{"GET", "/v1/models", "", "", []string{"Origin", "http://evil.example"}}); code != 403 {
		t.Errorf("Origin evil.example: %d %s", code, body)
	}
}

// --cors-origin adds to the defaults (ollama's, OLLAMA_ORIGINS adds to the
// same): the pages of this machine, of desktop shells and of editors'
// webviews stay allowed, and the origins named join them.
func TestCORSOriginAdds(t *testing.T) {
	ts := start(t, server.Config{CORSOrigins: []string{"https://ui.example", "https://*.corp.example:*"}})
	body := `{"prompt":"Once","max_tokens":2}`
	for origin, want := range map[string]int{
		"https://ui.example": 200, "http://localhost:5173": 200, "https://127.0.0.1": 200, "http://0.0.0.0:3000": 200,
		"http://[::1]:8080": 200, "app://obsidian.md": 200, "tauri://localhost": 200, "vscode-webview://1a2b3c": 200, "file://": 200,
		"https://chat.corp.example:8443": 200,
		"https://ui.example:8443":        403, "http://ui.example": 403, "https://corp.example": 403, "https://evil.example": 403,
	} {
		code, b, h := send(t, ts.URL, request{"POST", "/v1/completions", body, "", []string{"Origin", origin, "Content-Type", "text/plain"}})
		if code != want || want == 200 && h.Get("Access-Control-Allow-Origin") != origin {
			t.Errorf("Origin %s: %d (ACAO %q) %s, want %d", origin, code, h.Get("Access-Control-Allow-Origin"), b, want)
		}
	}
}

// The API key guards every route but /health, ollama's and /metrics
// included; the scheme is case-insensitive. Refusals under /api/ are in
// ollama's shape.
func TestAPIKeyEverywhere(t *testing.T) {
	ts := start(t, server.Config{APIKey: "k"})
	for _, path := range []string{"/metrics", "/api/version", "/api/tags", "/api/ps", "/v1/models", "/"} {
		code, body, h := send(t, ts.URL, request{"GET", path, "", "", nil})
		if code != http.StatusUnauthorized || h.Get("WWW-Authenticate") != "Bearer" {
			t.Errorf("%s without the key: %d %v", path, code, h)
		}
		errorShape(t, path, body, "API key")
		for _, auth := range []string{"Bearer k", "bearer k", "BEARER  k "} {
			if code, body, _ := send(t, ts.URL, request{"GET", path, "", "", []string{"Authorization", auth}}); code != 200 {
				t.Errorf("%s with %q: %d %s", path, auth, code, body)
			}
		}
	}
	for _, auth := range []string{"Basic k", "k", "Bearerk", "Bearer K"} {
		if code, _, _ := send(t, ts.URL, request{"GET", "/api/tags", "", "", []string{"Authorization", auth}}); code != 401 {
			t.Errorf("with %q: %d", auth, code)
		}
	}
	if code, body, _ := send(t, ts.URL, request{"GET", "/health", "", "", nil}); code != 200 {
		t.Errorf("/health without the key: %d %s", code, body)
	}
}

// serve's --allow-host and --cors-origin reach the server: a value that
// is no host name or origin is a usage error (exit 2), its last line
// naming it.
func TestServeGateFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--allow-host", "mybox.lan,http://other.lan/"},
		{"--cors-origin", "https://ui.example", "--cors-origin", "localhost"},
	} {
		var out, errOut bytes.Buffer
		code := cli.Main(append([]string{"serve", "--port", "0", "--adapt", "off"}, args...), &out, &errOut, server.Start)
		bad := args[len(args)-1]
		if i := strings.IndexByte(bad, ','); i >= 0 {
			bad = bad[i+1:]
		}
		lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
		last := lines[len(lines)-1]
		if code != 2 || !strings.HasPrefix(last, "dovetail: serve: ") || !strings.Contains(last, bad) {
			t.Errorf("%v: exit %d, %q", args, code, errOut.String())
		}
	}
}
