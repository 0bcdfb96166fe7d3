// Package server is Dovetail's local HTTP API, compatible with OpenAI's
// (chat completions, completions, models) so that existing clients and
// tools work against a local model unchanged, plus /health and Prometheus
// /metrics.
//
// Each request runs on one of the runner's slots: a sequence of its own (KV
// cache and scratch) over the one copy of the model weights, with its own
// share of the threads (slots sharing one pool would make every matrix
// product of one request wait for the chunks of another's; see
// docs/measurements). Requests beyond the slots wait in a bounded queue,
// and beyond that are refused with 429.
package server

import (
	"context"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"dovetail/app/runner"
)

// Config sets up a server.
type Config struct {
	// Runner runs the model: one slot (a sequence generating one request
	// at a time) per parallel request, each with its drafter. Requests
	// may name the model by its name, the base name of its file without
	// the extension, or "default".
	Runner *runner.Runner
	APIKey string // empty: no authentication
	Queue  int    // requests that may wait for a slot (< 0: 0)
	// ShutdownTimeout is how long Serve lets running generations finish
	// once its context is cancelled before it cancels them (0: 10 s).
	ShutdownTimeout time.Duration
}

// Server answers API requests. Create it with New, run it with Serve or
// mount Handler, and Close it afterwards; the runner is the caller's to
// close after.
type Server struct {
	model   *runner.Model
	cfg     Config
	ctxLen  int
	aliases map[string]bool
	fp      string // system_fingerprint
	created int64

	workers []*worker
	sched   *scheduler
	metrics *metrics
	mux     map[string]route

	// stop cancels every generation: Serve calls it when the shutdown
	// deadline passes.
	base context.Context
	stop context.CancelFunc

	active sync.WaitGroup // running handlers, so Close can wait for them
}

type route struct {
	method  string
	handler http.HandlerFunc
	public  bool // answered without the API key
}

// New serves the runner's slots.
func New(cfg Config) (*Server, error) {
	if cfg.Runner == nil {
		return nil, errors.New("server: no model")
	}
	m := cfg.Runner.Model()
	cfg.Queue = max(cfg.Queue, 0)
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 10 * time.Second
	}
	s := &Server{model: m, cfg: cfg, metrics: newMetrics(), created: time.Now().Unix()}
	s.base, s.stop = context.WithCancel(context.Background())
	// Clients name the model however they found it: the id /v1/models
	// gives, the file name, or with the extension dropped.
	s.aliases = map[string]bool{"": true, "default": true}
	names := []string{m.Name}
	if m.Path != "" {
		names = append(names, m.Path, filepath.Base(m.Path))
	}
	for _, n := range names {
		s.aliases[n] = true
		s.aliases[strings.TrimSuffix(n, filepath.Ext(n))] = true
	}
	s.fp = "fp_dovetail_" + fingerprint(m)
	for i := range cfg.Runner.Slots() {
		s.workers = append(s.workers, &worker{slot: cfg.Runner.Slot(i)})
	}
	s.ctxLen = cfg.Runner.Context()
	s.sched = newScheduler(s.workers, cfg.Queue, s.metrics.queue)
	s.mux = map[string]route{
		"/v1/chat/completions": {method: http.MethodPost, handler: s.handleChat},
		"/v1/completions":      {method: http.MethodPost, handler: s.handleCompletions},
		"/v1/models":           {method: http.MethodGet, handler: s.handleModels},
		"/health":              {method: http.MethodGet, handler: s.handleHealth, public: true},
		"/metrics": {method: http.MethodGet, public: true,
			handler: promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP},
	}
	return s, nil
}

// Handler is the API, for mounting in another server or a test.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.active.Add(1)
	defer s.active.Done()
	path := strings.TrimSuffix(r.URL.Path, "/")
	rt, ok := s.mux[path]
	endpoint := path
	if !ok {
		if p, found := strings.CutPrefix(path, "/v1/models/"); found && p != "" {
			rt, ok, endpoint = route{method: http.MethodGet, handler: s.handleModel}, true, "/v1/models/{model}"
		} else {
			endpoint = "other" // unbounded paths must not become label values
		}
	}
	rec := &statusRecorder{ResponseWriter: w}
	defer func() { s.metrics.request(endpoint, rec.code()) }()
	switch {
	case !ok:
		writeError(rec, notFound("Unknown request URL: %s %s.", r.Method, r.URL.Path))
	case r.Method != rt.method && !(rt.method == http.MethodGet && r.Method == http.MethodHead):
		rec.Header().Set("Allow", rt.method)
		e := invalid("", "method_not_allowed", "Method %s is not allowed for %s; use %s.", r.Method, path, rt.method)
		e.Status = http.StatusMethodNotAllowed
		writeError(rec, e)
	case !rt.public && !s.authorized(r):
		writeError(rec, errUnauthorized)
	default:
		rt.handler(rec, r)
	}
}

func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(key)), []byte(s.cfg.APIKey)) == 1
}

func (s *Server) knowsModel(name string) bool { return s.aliases[name] }

// Serve answers on ln until ctx is cancelled, then shuts down gracefully:
// it stops accepting, lets running generations finish for up to
// ShutdownTimeout, cancels those still running (they stop at their next
// token), and returns once every handler has returned.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		s.stop()
		s.active.Wait()
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		s.stop()
		hs.Close()
	}
	<-errc
	s.stop()
	s.active.Wait()
	return nil
}

// Close cancels running generations and waits for their handlers.
func (s *Server) Close() {
	s.stop()
	s.active.Wait()
}

// statusRecorder remembers the status code for the request metrics.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's Flush.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// code is the status sent, or 499 (nginx's "client closed request") when
// nothing was: the client left while its request waited.
func (r *statusRecorder) code() int {
	if r.status == 0 {
		return 499
	}
	return r.status
}
