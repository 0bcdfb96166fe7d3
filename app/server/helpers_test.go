package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"dovetail/app/runner"
	"dovetail/app/server"
)

var (
	loadOnce sync.Once
	tiny     *runner.Model
	loadErr  error
)

// tinyModel is the embedded TinyStories model, loaded once: its weights
// are read-only and shared by every test server, as by a server's slots.
func tinyModel(t testing.TB) *runner.Model {
	t.Helper()
	loadOnce.Do(func() { tiny, loadErr = runner.OpenModel("") })
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return tiny
}

// testOptions run one slot on two threads without drafting.
func testOptions() runner.Options {
	o := runner.DefaultOptions()
	o.Threads, o.Draft, o.Plan = min(2, runtime.NumCPU()), runner.DraftChoice{Kind: runner.DraftNone}, false
	return o
}

type testServer struct {
	URL  string
	srv  *server.Server
	stop func() // shuts down gracefully and closes; idempotent
	done chan error
}

// start runs a server of the embedded model with testOptions on a
// random loopback port until the test ends.
func start(t testing.TB, cfg server.Config) *testServer {
	t.Helper()
	return startWith(t, cfg, tinyModel(t), testOptions())
}

// startWith runs a server of m with runner options o.
func startWith(t testing.TB, cfg server.Config, m *runner.Model, o runner.Options) *testServer {
	t.Helper()
	if cfg.Queue == 0 {
		// A finished stream's handler may still be releasing its slot
		// when the client sends the next request.
		cfg.Queue = 4
	}
	r, err := runner.New(m, o)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Runner = r
	// Cleanups run last first: the server stops before the runner closes.
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("runner: %v", err)
		}
	})
	return startFleet(t, cfg)
}

// startFleet runs a server of cfg's models.
func startFleet(t testing.TB, cfg server.Config) *testServer {
	t.Helper()
	if cfg.Queue == 0 {
		cfg.Queue = 4
	}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ts := &testServer{URL: "http://" + ln.Addr().String(), srv: s, done: make(chan error, 1)}
	go func() { ts.done <- s.Serve(ctx, ln) }()
	var once sync.Once
	ts.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-ts.done; err != nil {
				t.Errorf("Serve: %v", err)
			}
			s.Close()
		})
	}
	t.Cleanup(ts.stop)
	return ts
}

// post sends a JSON body and returns the status and the whole body.
func post(t testing.TB, url, body string, header ...string) (int, []byte) {
	t.Helper()
	return do(t, http.MethodPost, url, body, header...)
}

func do(t testing.TB, method, url, body string, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// sseEvents splits a stream body into its data payloads.
func sseEvents(t testing.TB, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			out = append(out, d)
		}
	}
	return out
}

// metric reads one sample from /metrics (0 when absent). name includes
// the labels as Prometheus prints them, e.g. x{a="b"}.
func metric(t testing.TB, base, name string) float64 {
	t.Helper()
	_, body := do(t, http.MethodGet, base+"/metrics", "")
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`)
	m := re.FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("metric %s: %v", name, err)
	}
	return v
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func unmarshal(t testing.TB, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v in %s", err, b)
	}
}
