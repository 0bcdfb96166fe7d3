package pull

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Each refusal is one line that says what to do.
func TestStatusErrorLines(t *testing.T) {
	for _, c := range []struct {
		e    StatusError
		want string
	}{
		{StatusError{Name: "m:1", URL: "u", Code: 401}, "m:1: not authorized (401): this registry wants a login at u"},
		{StatusError{Name: "hf.co/o/r:Q4", URL: "u", Code: 401, HF: true}, "set HF_TOKEN to a Hugging Face token"},
		{StatusError{Name: "hf.co/o/r:Q4", URL: "u", Code: 403, HF: true}, "access refused (403): a gated repository: accept its terms"},
		{StatusError{Name: "m:1", URL: "u", Code: 404, Detail: "manifest unknown"}, "m:1: not found (404) (manifest unknown) at u"},
		{StatusError{Name: "m:1", URL: "u", Code: 429, Tries: 5}, "rate limited (429), 5 tries: wait a while and pull again"},
		{StatusError{Name: "m:1", URL: "u", Code: 502}, "the server answered 502 Bad Gateway"},
	} {
		if got := c.e.Error(); !strings.Contains(got, c.want) || strings.Contains(got, "\n") {
			t.Errorf("%d: %q, want %q", c.e.Code, got, c.want)
		}
	}
	if got := (&NetError{Name: "m:1", Host: "h", Tries: 5, Err: errStalled}).Error(); got != "m:1: timed out talking to h (5 tries): "+errStalled.Error() {
		t.Errorf("stalled: %q", got)
	}
	if !errors.Is(&StatusError{Code: 404}, ErrNotFound) || errors.Is(&StatusError{Code: 401}, ErrNotFound) {
		t.Error("only a 404 is ErrNotFound")
	}
}

func TestRetryAfter(t *testing.T) {
	for h, want := range map[string]time.Duration{"0": 0, "7": 7 * time.Second, "-3": 0} {
		if d, ok := retryAfter(h, 1); !ok || d != want {
			t.Errorf("Retry-After %q: %v %v, want %v", h, d, ok, want)
		}
	}
	if d, ok := retryAfter(time.Now().Add(time.Hour).UTC().Format(http.TimeFormat), 1); ok {
		t.Errorf("an hour's wait is waited on (%v)", d)
	}
	if _, ok := retryAfter("600", 1); ok {
		t.Error("ten minutes' wait is waited on")
	}
	if d, ok := retryAfter("soon", 1); !ok || d <= 0 {
		t.Errorf("an unreadable Retry-After: %v %v, want the backoff", d, ok)
	}
}

// A connection dropped before the answer is tried again; one that drops
// every time ends in one line naming the host and the tries.
func TestConnectionResetRetried(t *testing.T) {
	h := newHub(t)
	h.addModel("library/tiny:latest", testModel(t), nil)
	var drops atomic.Int32
	drops.Store(2)
	reg := h.reg.Config.Handler
	h.reg.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if drops.Add(-1) >= 0 {
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		reg.ServeHTTP(w, r)
	})
	o, _ := h.opts(t.TempDir(), nil)
	if _, err := Pull(pullCtx(t), "tiny", o); err != nil {
		t.Fatal(err)
	}
	drops.Store(100)
	_, err := Pull(pullCtx(t), "other", o)
	var ne *NetError
	if !errors.As(err, &ne) || ne.Tries != maxTries || !strings.Contains(err.Error(), "could not reach "+strings.TrimPrefix(h.reg.URL, "http://")) {
		t.Fatalf("err = %v", err)
	}
}

// Two pulls of one file at once: the second says so, and the first's
// partial file is untouched.
func TestConcurrentPullRefused(t *testing.T) {
	h := newHub(t)
	gguf := testModel(t)
	h.addModel("library/tiny:latest", gguf, nil)
	h.stallAt[digestOf(gguf)] = 1000
	dir := t.TempDir()
	o, _ := h.opts(dir, nil)
	ctx, cancel := context.WithCancel(pullCtx(t))
	started := make(chan struct{}, 1)
	o.Progress = func(p Progress) {
		if p.Completed >= 1000 {
			select {
			case started <- struct{}{}:
			default:
			}
		}
	}
	done := make(chan error)
	go func() { _, err := Pull(ctx, "tiny", o); done <- err }()
	<-started
	o2, _ := h.opts(dir, nil)
	if _, err := Pull(pullCtx(t), "tiny", o2); err == nil || !strings.Contains(err.Error(), "another pull is downloading this model") {
		t.Errorf("second pull: %v", err)
	}
	cancel()
	var intr *Interrupted
	if err := <-done; !errors.As(err, &intr) || intr.Have != 1000 {
		t.Errorf("first pull: %v", err)
	}
}
