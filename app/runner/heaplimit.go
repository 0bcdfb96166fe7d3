package runner

import (
	"math"
	"os"
	"runtime/debug"
	"sync"
)

// The runner is the one place that sets the process's Go heap soft limit
// (debug.SetMemoryLimit): once as each runner opens, to the open runners'
// host budgets plus headroom, and once as it closes; Budget.HeapLimit says
// what it set, and `run --json` shows it. Left to GOGC alone, the collector
// lets garbage grow the heap to twice what is live before it collects, and a
// trainer makes garbage at a steady rate: a long session held far more memory
// than its budget (docs/measurements/memory-and-startup.md, "A session's
// memory"). With the limit the collector runs more often as the heap nears
// the budget instead. A GOMEMLIMIT the user set stands.
var memLimit struct {
	sync.Mutex
	total uint64 // the open runners' host budgets
}

// limitHeadroom is the slack above the budgets: what no budget counts
// (request buffers, the tokenizer, a window's fonts and images, goroutine
// stacks, a closed runner's garbage), and room for the collector to work
// in. Too little and it collects all the time: 64 MiB made a test that
// opens thirty small runners in turn collect eight times as often.
func limitHeadroom(total uint64) uint64 { return total/8 + 256<<20 }

// holdMemory counts bytes of host memory for a runner until the returned
// function gives them back, and sets the heap's limit to what is held; it
// returns the limit it set (0: none, GOMEMLIMIT stands).
func holdMemory(bytes uint64) (limit uint64, release func()) {
	if os.Getenv("GOMEMLIMIT") != "" || bytes == 0 {
		return 0, func() {}
	}
	adjust := func(add bool) uint64 {
		memLimit.Lock()
		defer memLimit.Unlock()
		if add {
			memLimit.total += bytes
		} else {
			memLimit.total -= bytes
		}
		limit := uint64(math.MaxInt64) // none
		if memLimit.total > 0 {
			limit = memLimit.total + limitHeadroom(memLimit.total)
		}
		debug.SetMemoryLimit(int64(limit))
		return limit
	}
	limit = adjust(true)
	var once sync.Once
	return limit, func() { once.Do(func() { adjust(false) }) }
}
