package server

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestScheduler(t *testing.T) {
	var lastWaiting, lastRunning int
	s := newScheduler([]*worker{{}, {}}, 1, func(w, r int) { lastWaiting, lastRunning = w, r })
	ctx := context.Background()
	a, err := s.acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.acquire(ctx)
	if err != nil || a == b {
		t.Fatal(err)
	}
	if lastRunning != 2 || lastWaiting != 0 {
		t.Errorf("running %d waiting %d", lastRunning, lastWaiting)
	}

	// The third waits in the queue; the fourth finds it full.
	got := make(chan *worker)
	go func() {
		w, _ := s.acquire(ctx)
		got <- w
	}()
	for s.depth() != 1 {
		time.Sleep(time.Millisecond)
	}
	if _, err := s.acquire(ctx); !errors.Is(err, errNoRoom) {
		t.Errorf("full queue: %v", err)
	}
	s.release(a)
	if w := <-got; w != a {
		t.Error("the waiter did not get the released worker")
	}

	// A waiter whose client leaves gives up its place.
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error)
	go func() {
		_, err := s.acquire(cctx)
		errc <- err
	}()
	for s.depth() != 1 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled waiter: %v", err)
	}
	if s.depth() != 0 || lastWaiting != 0 || lastRunning != 2 {
		t.Errorf("after cancel: depth %d, hook %d/%d", s.depth(), lastWaiting, lastRunning)
	}
	s.release(a)
	s.release(b)
	if lastRunning != 0 {
		t.Errorf("running %d after releasing all", lastRunning)
	}
}
