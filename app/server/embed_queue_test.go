package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"dovetail/app/runner"
)

// An embedding takes a slot as a generation does: while the one slot is
// held it waits in the queue and runs once the slot is free, and with no
// room in the queue it is refused with 429.
func TestEmbedSharesTheQueue(t *testing.T) {
	m, err := runner.OpenModel("")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	o := runner.DefaultOptions()
	o.Threads, o.Draft, o.Plan = 1, runner.DraftChoice{Kind: runner.DraftNone}, false
	r, err := runner.New(m, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, queue := range []int{1, 0} {
		s, err := New(Config{Runner: r, Queue: queue})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(s.Handler())
		sched := s.scheduler(r)
		held, err := sched.acquire(context.Background()) // a generation holds the slot
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan int, 1)
		go func() {
			resp, err := http.Post(hs.URL+"/v1/embeddings", "application/json", strings.NewReader(`{"input":"Once upon a time"}`))
			if err != nil {
				done <- 0
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
		if queue == 0 {
			if code := <-done; code != http.StatusTooManyRequests {
				t.Errorf("no room in the queue: %d, want 429", code)
			}
		} else {
			for deadline := time.Now().Add(10 * time.Second); sched.depth() != 1; time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the embedding never waited in the queue")
				}
			}
			select {
			case code := <-done:
				t.Fatalf("answered %d while the slot was held", code)
			default:
			}
			sched.release(held)
			held = nil
			if code := <-done; code != http.StatusOK {
				t.Errorf("once the slot was free: %d", code)
			}
		}
		if held != nil {
			sched.release(held)
		}
		hs.Close()
		s.Close()
	}
}
