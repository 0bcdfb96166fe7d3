// Package cpu runs the target model on the CPU.
package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"

	"dovetail/cpu/kernels"
)

// Pool runs data-parallel loops on a fixed set of goroutines, so that a
// decode step does not create goroutines per matrix product.
type Pool struct {
	n     int
	tasks chan func()

	mu      sync.Mutex
	threads map[*kernels.Set]*kernels.Threads // C threads, per kernel set
	closed  bool
}

// NewPool starts a pool of n workers (n ≤ 0: one per CPU). The caller's
// goroutine works too, so n−1 goroutines are started.
func NewPool(n int) *Pool {
	if n <= 0 {
		n = runtime.NumCPU()
	}
	p := &Pool{n: n, tasks: make(chan func(), n)}
	for i := 1; i < n; i++ {
		go func() {
			for t := range p.tasks {
				t()
			}
		}()
	}
	return p
}

// Threads is the number of goroutines a loop runs on.
func (p *Pool) Threads() int { return p.n }

// Close stops the workers, and the C threads cThreads started.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, t := range p.threads {
		t.Close()
	}
	p.threads, p.closed = nil, true
	close(p.tasks)
}

// cThreads returns Threads() C threads of kernel set k for whole packed
// matrix products, started on first use, or nil where k has none or the
// pool has one thread.
func (p *Pool) cThreads(k *kernels.Set) *kernels.Threads {
	if p.n < 2 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	t, ok := p.threads[k]
	if !ok {
		t = k.NewThreads(p.n)
		if p.threads == nil {
			p.threads = map[*kernels.Set]*kernels.Threads{}
		}
		p.threads[k] = t
	}
	return t
}

// For calls fn over [0, n) split into at most Threads() contiguous chunks
// and returns when all are done.
func (p *Pool) For(n int, fn func(lo, hi int)) {
	p.ForChunks(n, func(_, lo, hi int) { fn(lo, hi) })
}

// ForChunks is For that also passes the chunk number, below Threads(), so
// that each chunk can use its own scratch memory.
func (p *Pool) ForChunks(n int, fn func(chunk, lo, hi int)) {
	chunks := min(p.n, n)
	if chunks <= 1 {
		if n > 0 {
			fn(0, 0, n)
		}
		return
	}
	var wg sync.WaitGroup
	wg.Add(chunks - 1)
	for c := 1; c < chunks; c++ {
		lo, hi := c*n/chunks, (c+1)*n/chunks
		p.tasks <- func() { fn(c, lo, hi); wg.Done() }
	}
	fn(0, 0, n/chunks)
	wg.Wait()
}

// ForDynamic calls fn over [0, n) in pieces of grain, which the workers
// take one after another as they finish their last: a worker slowed down
// (by another process, or by a busier memory channel) takes fewer pieces
// instead of holding up the loop, as a fixed split would.
func (p *Pool) ForDynamic(n, grain int, fn func(lo, hi int)) {
	grain = max(grain, 1)
	parts := (n + grain - 1) / grain
	workers := min(p.n, parts)
	if workers <= 1 {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	var next atomic.Int64
	run := func() {
		for {
			i := int(next.Add(1)) - 1
			if i >= parts {
				return
			}
			fn(i*grain, min(n, (i+1)*grain))
		}
	}
	var wg sync.WaitGroup
	wg.Add(workers - 1)
	for range workers - 1 {
		p.tasks <- func() { run(); wg.Done() }
	}
	run()
	wg.Wait()
}
