package cpu

import (
	"sync"
	"time"

	"dovetail/cpu/kernels"
	"dovetail/models"
)

// MeasureBandwidth estimates memory bandwidth in GB/s, counted as STREAM's
// copy counts it (bytes read plus bytes written), with threads goroutines
// each copying its own 64 MiB, which no cache holds.
func MeasureBandwidth(threads, reps int) float64 {
	const size = 64 << 20
	src, dst := touchedBuffers(threads, size), touchedBuffers(threads, size)
	return bestPass(reps, 2*size*threads, func(wg *sync.WaitGroup) {
		for i := range src {
			wg.Go(func() { copy(dst[i], src[i]) })
		}
	})
}

// MeasureReadBandwidth estimates how fast threads goroutines read memory,
// in GB/s, each streaming its own 128 MiB, which no cache holds, with k's
// loads (kernels.Set.StreamRead): what decoding does to the weights, so
// the bandwidth its roofline is taken from. (Counted as STREAM's copy
// counts, MeasureBandwidth, a machine can give far more than reads alone:
// docs/measurements, "The roofline of decoding".)
func MeasureReadBandwidth(k *kernels.Set, threads, reps int) float64 {
	const size = 128 << 20
	bufs := touchedBuffers(threads, size)
	return bestPass(reps, size*threads, func(wg *sync.WaitGroup) {
		for _, b := range bufs {
			wg.Go(func() { k.StreamRead(b) })
		}
	})
}

// touchedBuffers makes n buffers of size bytes with every page touched, so
// that no pass pays for the first touch.
func touchedBuffers(n, size int) [][]byte {
	bufs := make([][]byte, n)
	for i := range bufs {
		bufs[i] = make([]byte, size)
		for j := 0; j < size; j += 4096 {
			bufs[i][j] = byte(j>>12) | 1
		}
	}
	return bufs
}

// bestPass times reps passes of start (which starts its goroutines on wg)
// moving bytes each and returns the best rate in GB/s: a shared machine
// only ever slows a pass down.
func bestPass(reps, bytes int, start func(wg *sync.WaitGroup)) float64 {
	best := 0.0
	for range reps {
		var wg sync.WaitGroup
		t := time.Now()
		start(&wg)
		wg.Wait()
		best = max(best, float64(bytes)/time.Since(t).Seconds()/1e9)
	}
	return best
}

// WeightBytesPerToken is the weight memory one decode step reads: every
// matrix but the token embedding, of which only one row is read (unless it
// doubles as the output matrix).
func (f *Fast) WeightBytesPerToken() int64 {
	m := f.M
	n := int64(len(m.Output.Data))
	for i := range m.Layers {
		l := &m.Layers[i]
		for _, t := range []*models.Tensor{l.Q, l.K, l.V, l.O, l.Gate, l.Up, l.Down} {
			n += int64(len(t.Data))
		}
	}
	return n
}
