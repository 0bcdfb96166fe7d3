package server

import (
	"context"
	"errors"
	"sync"

	"dovetail/app/runner"
)

// worker is one generation slot: the runner's sequence of the shared
// model weights, its threads and its drafter.
type worker struct {
	slot *runner.Slot
}

// scheduler hands workers to requests. Requests beyond the workers wait,
// but only up to a bound: an unbounded queue would let a burst pile up
// requests whose clients time out long before their turn, each holding a
// connection and a goroutine; beyond the bound they are refused at once
// (429) and can retry.
type scheduler struct {
	idle     chan *worker
	maxQueue int

	mu      sync.Mutex
	waiting int

	onChange func(waiting, running int) // metrics hook, called under mu
	running  int
}

var errNoRoom = errors.New("queue full")

func newScheduler(workers []*worker, maxQueue int, onChange func(waiting, running int)) *scheduler {
	s := &scheduler{idle: make(chan *worker, len(workers)), maxQueue: maxQueue, onChange: onChange}
	for _, w := range workers {
		s.idle <- w
	}
	if s.onChange == nil {
		s.onChange = func(int, int) {}
	}
	return s
}

// acquire returns a free worker, waiting for one if the queue has room. It
// fails with errQueueFull when it has none, or with ctx's error when the
// client leaves (or the server stops) while waiting.
func (s *scheduler) acquire(ctx context.Context) (*worker, error) {
	s.mu.Lock()
	select {
	case w := <-s.idle:
		s.running++
		s.onChange(s.waiting, s.running)
		s.mu.Unlock()
		return w, nil
	default:
	}
	if s.waiting >= s.maxQueue {
		s.mu.Unlock()
		return nil, errNoRoom
	}
	s.waiting++
	s.onChange(s.waiting, s.running)
	s.mu.Unlock()

	var w *worker
	select {
	case w = <-s.idle:
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting--
	if w == nil {
		s.onChange(s.waiting, s.running)
		return nil, ctx.Err()
	}
	s.running++
	s.onChange(s.waiting, s.running)
	return w, nil
}

// release returns w to the idle set.
func (s *scheduler) release(w *worker) {
	s.mu.Lock()
	s.running--
	s.onChange(s.waiting, s.running)
	s.idle <- w // never blocks: the channel holds every worker
	s.mu.Unlock()
}

// depth is the number of waiting requests.
func (s *scheduler) depth() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}
