// Package server is Dovetail's local HTTP API, compatible with OpenAI's
// (chat completions, completions, embeddings, models) so that existing clients and
// tools work against a local model unchanged, plus /health and Prometheus
// /metrics.
//
// Each request runs on one of the runner's slots: a sequence of its own (KV
// cache and scratch) over the one copy of the model weights, with its own
// share of the threads (slots sharing one pool would make every matrix
// product of one request wait for the chunks of another's; see
// docs/measurements/server.md, "Parallel slots"). Requests beyond the slots
// wait in a bounded queue, and beyond that are refused with 429.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"dovetail/app/api"
	"dovetail/app/runner"
	"dovetail/app/runner/discover"
)

// Config sets up a server (see api.Config).
type Config = api.Config

// Server answers API requests. Create it with New, run it with Serve or
// mount Handler, and Close it afterwards; the models are the caller's to
// close after.
type Server struct {
	fleet   *runner.Fleet
	cfg     Config
	created int64
	cors    corsPolicy
	hosts   hostPolicy
	anyHost atomic.Bool // listening beyond loopback: every Host is answered

	mu     sync.Mutex
	scheds map[*runner.Runner]*scheduler // a loaded model's slots
	queued map[*scheduler][2]int         // waiting and running, for the metrics

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
	public  bool // answered without the API key (/health only)
}

// Start is New as the front ends take it (api.Start).
func Start(cfg api.Config) (api.Server, error) {
	s, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// New serves the models of cfg.
func New(cfg Config) (*Server, error) {
	if cfg.Models == nil && cfg.Runner == nil {
		return nil, errors.New("server: no model")
	}
	if cfg.Runner != nil && (cfg.ReserveSlots < 0 || cfg.ReserveSlots >= cfg.Runner.Slots()) {
		return nil, fmt.Errorf("server: %d of %d slots reserved leave none to serve", cfg.ReserveSlots, cfg.Runner.Slots())
	}
	cors, err := newCORS(cfg.CORSOrigins)
	if err != nil {
		return nil, err
	}
	hosts, err := newHosts(cfg.AllowedHosts)
	if err != nil {
		return nil, err
	}
	if cfg.Models == nil {
		f, err := runner.NewFleet(nil, runner.FleetOptions{})
		if err != nil {
			return nil, err
		}
		m := cfg.Runner.Model()
		f.Pin(discover.Model{Name: m.Name, Path: m.Path, Source: "file"}, m, cfg.Runner)
		cfg.Models = f
	}
	cfg.Queue = max(cfg.Queue, 0)
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = api.DefaultShutdownTimeout
	}
	s := &Server{fleet: cfg.Models, cfg: cfg, metrics: newMetrics(), created: time.Now().Unix(), cors: cors, hosts: hosts,
		scheds: map[*runner.Runner]*scheduler{}, queued: map[*scheduler][2]int{}}
	s.base, s.stop = context.WithCancel(context.Background())
	s.mux = map[string]route{
		"/v1/chat/completions": {method: http.MethodPost, handler: s.handleChat},
		"/v1/completions":      {method: http.MethodPost, handler: s.handleCompletions},
		"/v1/models":           {method: http.MethodGet, handler: s.handleModels},
		"/v1/embeddings":       {method: http.MethodPost, handler: s.handleEmbeddings},
		"/health":              {method: http.MethodGet, handler: s.handleHealth, public: true},
		"/metrics": {method: http.MethodGet,
			handler: promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{}).ServeHTTP},
	}
	s.ollamaRoutes()
	return s, nil
}

// scheduler is the slots of a loaded model's runner, made on first use.
func (s *Server) scheduler(r *runner.Runner) *scheduler {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc := s.scheds[r]; sc != nil {
		return sc
	}
	var ws []*worker
	from := 0
	if r == s.cfg.Runner {
		from = s.cfg.ReserveSlots
	}
	for i := from; i < r.Slots(); i++ {
		ws = append(ws, &worker{slot: r.Slot(i)})
	}
	var sc *scheduler
	sc = newScheduler(ws, s.cfg.Queue, func(waiting, running int) { s.queueChanged(sc, waiting, running) })
	s.scheds[r] = sc
	return sc
}

// Forget drops what the server kept for a runner that is unloading
// (runner.FleetOptions.OnUnload).
func (s *Server) Forget(r *runner.Runner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sc := s.scheds[r]; sc != nil {
		delete(s.queued, sc)
	}
	delete(s.scheds, r)
}

// queueChanged sums every model's queue for the metrics; the scheduler's
// lock is held, never the other way round.
func (s *Server) queueChanged(sc *scheduler, waiting, running int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.queued[sc]; !ok && waiting == 0 && running == 0 {
		return
	}
	s.queued[sc] = [2]int{waiting, running}
	var w, r int
	for _, q := range s.queued {
		w, r = w+q[0], r+q[1]
	}
	s.metrics.queue(w, r)
}

// Handler is the API, for mounting in another server or a test.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.active.Add(1)
	defer s.active.Done()
	path := strings.TrimSuffix(r.URL.Path, "/")
	if path == "" {
		path = "/"
	}
	rt, ok, endpoint := s.route(path)
	rec := &statusRecorder{ResponseWriter: w}
	defer func() { s.metrics.request(endpoint, rec.code()) }()
	if e := s.gate(r); e != nil {
		answerError(rec, path, e)
		return
	}
	if s.cors.handle(rec, r) {
		return // a preflight, answered
	}
	switch {
	case !ok:
		answerError(rec, path, notFound("Unknown request URL: %s %s.", r.Method, r.URL.Path))
	case r.Method != rt.method && !(rt.method == http.MethodGet && r.Method == http.MethodHead):
		rec.Header().Set("Allow", rt.method)
		e := invalid("", "method_not_allowed", "Method %s is not allowed for %s; use %s.", r.Method, path, rt.method)
		e.Status = http.StatusMethodNotAllowed
		answerError(rec, path, e)
	case !rt.public && !s.authorized(r):
		rec.Header().Set("WWW-Authenticate", "Bearer")
		answerError(rec, path, errUnauthorized)
	default:
		rt.handler(rec, r)
	}
}

// route is the route of path and its endpoint label for the metrics.
func (s *Server) route(path string) (route, bool, string) {
	if rt, ok := s.mux[path]; ok {
		return rt, true, path
	}
	if p, found := strings.CutPrefix(path, "/v1/models/"); found && p != "" {
		return route{method: http.MethodGet, handler: s.handleModel}, true, "/v1/models/{model}"
	}
	return route{}, false, "other" // unbounded paths must not become label values
}

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
	s.anyHost.Store(answersAnyHost(ln))
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
		// Cancelled generations end their streams with an error event
		// (and [DONE]) before the connections close.
		s.stop()
		handlersDone := make(chan struct{})
		go func() { s.active.Wait(); close(handlersDone) }()
		select {
		case <-handlersDone:
		case <-time.After(2 * time.Second):
		}
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
