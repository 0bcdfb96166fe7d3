// Package memload makes a slow memory hour on purpose: a reader that
// streams a buffer larger than the caches at a fixed rate, beside the
// engines being measured, takes the same share of the memory's bandwidth
// from each (issue 42: this VM's read rate swings threefold from day to
// day, and a desktop runs a browser beside the model).
package memload

import (
	"context"
	"fmt"
	"time"
)

// chunk is how many bytes are read between looks at the clock: 4 MiB is
// about half a millisecond at the rates that matter, fine enough for a
// steady rate and coarse enough that the clock costs nothing.
const chunk = 4 << 20

// sink keeps the sums, so that the reads are not optimised away.
var sink uint64

// Stats is what a Run read.
type Stats struct {
	Bytes   int64
	Elapsed time.Duration
}

// Rate is the bytes per second read.
func (s Stats) Rate() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Bytes) / s.Elapsed.Seconds()
}

// Run reads a buffer of size bytes over and over at rate bytes a second
// (≤ 0: as fast as it can) until ctx ends, calling report every second
// with what it read since the last call. It returns what it read in all.
func Run(ctx context.Context, size int, rate float64, report func(Stats)) (Stats, error) {
	if size < chunk {
		return Stats{}, fmt.Errorf("memload: a buffer of %d bytes, want at least %d", size, chunk)
	}
	buf := make([]uint64, size/8)
	for i := range buf {
		buf[i] = uint64(i) // touched, so that every page is the process's own
	}
	start := time.Now()
	var total Stats
	last, lastBytes := start, int64(0)
	for off := 0; ctx.Err() == nil; off = (off + chunk/8) % (len(buf) - chunk/8 + 1) {
		sink += sum(buf[off : off+chunk/8])
		total.Bytes += chunk
		now := time.Now()
		total.Elapsed = now.Sub(start)
		if rate > 0 {
			if ahead := time.Duration(float64(total.Bytes)/rate*1e9) - total.Elapsed; ahead > 0 {
				sleep(ctx, ahead)
				now = time.Now()
				total.Elapsed = now.Sub(start)
			}
		}
		if report != nil && now.Sub(last) >= time.Second {
			report(Stats{Bytes: total.Bytes - lastBytes, Elapsed: now.Sub(last)})
			last, lastBytes = now, total.Bytes
		}
	}
	return total, nil
}

// sum reads v with eight independent chains, so that one core streams.
func sum(v []uint64) uint64 {
	var s0, s1, s2, s3, s4, s5, s6, s7 uint64
	for i := 0; i+8 <= len(v); i += 8 {
		s0 += v[i]
		s1 += v[i+1]
		s2 += v[i+2]
		s3 += v[i+3]
		s4 += v[i+4]
		s5 += v[i+5]
		s6 += v[i+6]
		s7 += v[i+7]
	}
	return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
