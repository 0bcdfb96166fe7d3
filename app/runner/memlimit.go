package runner

import (
	"math"
	"os"
	"runtime/debug"
	"sync"
)

// The Go heap's soft limit follows what the open runners budgeted. Left
// to GOGC alone, the collector lets garbage grow the heap to twice what
// is live before it collects, and a trainer makes garbage at a steady
// rate: a long session held far more memory than its budget
// (docs/measurements, "A session's memory"). With the limit the collector
// runs more often as the heap nears the budget instead. A GOMEMLIMIT the
// user set stands.
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
// function gives them back, and sets the heap's limit to what is held.
func holdMemory(bytes uint64) (release func()) {
	if os.Getenv("GOMEMLIMIT") != "" || bytes == 0 {
		return func() {}
	}
	adjust := func(add bool) {
		memLimit.Lock()
		defer memLimit.Unlock()
		if add {
			memLimit.total += bytes
		} else {
			memLimit.total -= bytes
		}
		limit := int64(math.MaxInt64) // none
		if memLimit.total > 0 {
			limit = int64(memLimit.total + limitHeadroom(memLimit.total))
		}
		debug.SetMemoryLimit(limit)
	}
	adjust(true)
	var once sync.Once
	return func() { once.Do(func() { adjust(false) }) }
}
