package server_test

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"dovetail/app/runner"
	"dovetail/app/server"
	"dovetail/engine"
	"dovetail/engine/adapt"
	"dovetail/engine/drafters"
	"dovetail/engine/tree"
)

// openStream starts a streaming completion and returns its events as they
// arrive, and a func that hangs up.
func openStream(t *testing.T, base string, maxTokens int) (<-chan string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"prompt":"Once upon a time","stream":true,"temperature":0,"max_tokens":` + strconv.Itoa(maxTokens) + `}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		cancel()
		t.Fatalf("status %d", resp.StatusCode)
	}
	events := make(chan string, 1024)
	go func() {
		defer close(events)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- d
			}
		}
	}()
	return events, cancel
}

// A client that hangs up stops its generation at the next token: the slot
// is free long before max_tokens could have been generated.
func TestDisconnectCancels(t *testing.T) {
	o := testOptions()
	o.Threads = 1
	ts := startWith(t, server.Config{}, tinyModel(t), o)
	const max = 480
	events, hangUp := openStream(t, ts.URL, max)
	<-events
	<-events
	hangUp()
	eventually(t, 2*time.Second, "slot released after hang-up", func() bool {
		return metric(t, ts.URL, "dovetail_requests_in_flight") == 0
	})
	if gen := metric(t, ts.URL, "dovetail_generated_tokens_total"); gen >= max {
		t.Errorf("generated %v tokens after the client left; it asked for %d", gen, max)
	}
	if code, body := post(t, ts.URL+"/v1/completions", `{"prompt":"Hi","max_tokens":3}`); code != 200 {
		t.Errorf("next request: %d %s", code, body)
	}
}

// On shutdown, a running generation finishes within the deadline and its
// client gets the whole stream.
func TestShutdownFinishesRunning(t *testing.T) {
	ts := start(t, server.Config{ShutdownTimeout: 10 * time.Second})
	events, hangUp := openStream(t, ts.URL, 100)
	defer hangUp()
	<-events
	stopped := make(chan struct{})
	go func() { ts.stop(); close(stopped) }()
	var all []string
	for ev := range events {
		all = append(all, ev)
	}
	if len(all) == 0 || all[len(all)-1] != "[DONE]" {
		t.Errorf("stream cut by shutdown: %q", all)
	}
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after the stream ended")
	}
	if _, err := http.Get(ts.URL + "/health"); err == nil {
		t.Error("the server still accepts connections after shutdown")
	}
}

// slowDrafter drafts nothing useful, slowly: a generation that takes
// seconds, so that a shutdown finds it running.
type slowDrafter struct{ drafters.Ngram }

func (d *slowDrafter) Draft(ctx []int, p tree.Params) (*tree.Tree, error) {
	time.Sleep(20 * time.Millisecond)
	return &tree.Tree{}, nil
}

// slowOptions run one slot with a slowDrafter and no planner.
func slowOptions() runner.Options {
	o := testOptions()
	o.Threads = 1
	o.NewDrafter = func(int) (engine.Drafter, error) { return &slowDrafter{}, nil }
	return o
}

// Past the deadline, shutdown cancels what still runs and returns.
func TestShutdownCancelsAfterDeadline(t *testing.T) {
	const deadline = 50 * time.Millisecond
	ts := startWith(t, server.Config{ShutdownTimeout: deadline}, tinyModel(t), slowOptions())
	events, hangUp := openStream(t, ts.URL, 480)
	defer hangUp()
	<-events
	begin := time.Now()
	ts.stop()
	if took := time.Since(begin); took > deadline+2*time.Second {
		t.Errorf("shutdown took %v with a %v deadline", took, deadline)
	}
	var all []string
	for ev := range events {
		all = append(all, ev)
	}
	// Cancelled, the stream still ends as streams end: an error event,
	// then [DONE].
	n := len(all)
	if n < 2 || all[n-1] != "[DONE]" {
		t.Fatalf("stream ended with %q", all[max(0, n-2):])
	}
	if !strings.Contains(all[n-2], `"error"`) || !strings.Contains(all[n-2], "shutting down") {
		t.Errorf("the event before [DONE] is %s, want an error saying the server shuts down", all[n-2])
	}
}

// ollama's streams, cancelled by a shutdown, end with an object that is
// done and says why.
func TestShutdownEndsOllamaStream(t *testing.T) {
	ts := startWith(t, server.Config{ShutdownTimeout: 50 * time.Millisecond}, tinyModel(t), slowOptions())
	resp, err := http.Post(ts.URL+"/api/generate", "application/json",
		strings.NewReader(`{"model":"default","prompt":"Once upon a time","raw":true,"options":{"temperature":0,"num_predict":480}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() {
		t.Fatal("no first line")
	}
	go ts.stop()
	var last string
	for sc.Scan() {
		last = sc.Text()
	}
	if !strings.Contains(last, `"done":true`) || !strings.Contains(last, `"error"`) || !strings.Contains(last, "shutting down") {
		t.Errorf("last line %s", last)
	}
}

// A running generation gets the grace, no more: Serve waits for it that
// long, then cancels it and returns within a second.
func TestShutdownGrace(t *testing.T) {
	const grace = 400 * time.Millisecond
	ts := startWith(t, server.Config{ShutdownTimeout: grace}, tinyModel(t), slowOptions())
	events, hangUp := openStream(t, ts.URL, 480)
	defer hangUp()
	<-events
	begin := time.Now()
	ts.stop()
	took := time.Since(begin)
	if took < grace || took > grace+time.Second {
		t.Errorf("Serve returned %v after the shutdown began, with a grace of %v", took, grace)
	}
	var last string
	for ev := range events {
		if ev != "[DONE]" {
			last = ev
		}
	}
	if !strings.Contains(last, "shutting down") {
		t.Errorf("the stream ended with %s, want the error of a shutdown", last)
	}
}

// A shutdown with the draft's trainer in the middle of a step and a
// request streaming: Serve returns within the grace and a second, and the
// runner's close (which stops the trainer and saves) within StopWait
// more.
func TestShutdownWithTrainerInFlight(t *testing.T) {
	o := testOptions()
	o.Draft = runner.DraftChoice{Kind: runner.DraftAuto} // the embedded model's draft, adapting
	o.Adapt.Save = false
	e := &o.Adapt.Engine
	// Steps of 2048 positions, and runs that never reach a comparison.
	e.Window, e.Batch, e.Steps, e.HeldOut, e.MemoryTokens, e.Control.MinRecords = 64, 32, 1<<20, 1, 0, 64
	r, err := runner.New(tinyModel(t), o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const grace = 300 * time.Millisecond
	ts := startFleet(t, server.Config{Runner: r, ShutdownTimeout: grace})
	deadline := time.Now().Add(2 * time.Minute)
	for st, _ := r.Adaptation(); !st.Training; st, _ = r.Adaptation() {
		if time.Now().After(deadline) {
			t.Fatal("the trainer did not start")
		}
		if code, body := post(t, ts.URL+"/v1/completions", `{"prompt":"Once upon a time","max_tokens":200,"temperature":1}`); code != 200 {
			t.Fatalf("%d %s", code, body)
		}
	}
	events, hangUp := openStream(t, ts.URL, 480)
	defer hangUp()
	<-events
	begin := time.Now()
	ts.stop()
	served := time.Since(begin)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	closed := time.Since(begin)
	t.Logf("Serve returned after %v, the runner closed after %v (grace %v)", served, closed, grace)
	if served > grace+time.Second || closed > served+adapt.StopWait+time.Second {
		t.Errorf("Serve returned after %v and the runner closed after %v, with a grace of %v", served, closed, grace)
	}
}
