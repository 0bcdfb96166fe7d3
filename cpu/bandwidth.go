package cpu

import (
	"sync"
	"time"

	"dovetail/cpu/kernels"
	"dovetail/models"
)

// MeasureBandwidth estimates memory bandwidth in GB/s, counted as STREAM's
// copy counts it (bytes read plus bytes written), with threads goroutines
// each copying its own 64 MiB, which no cache holds. The best of reps
// passes is reported, since a shared machine only ever slows a pass down.
func MeasureBandwidth(threads, reps int) float64 {
	const size = 64 << 20
	src := make([][]byte, threads)
	dst := make([][]byte, threads)
	for i := range src {
		src[i] = make([]byte, size)
		dst[i] = make([]byte, size)
		for j := 0; j < size; j += 4096 {
			src[i][j] = byte(j) // touch every page
			dst[i][j] = 1
		}
	}
	best := 0.0
	for r := 0; r < reps; r++ {
		var wg sync.WaitGroup
		start := time.Now()
		for i := range src {
			wg.Add(1)
			go func() {
				copy(dst[i], src[i])
				wg.Done()
			}()
		}
		wg.Wait()
		gbs := float64(2*size*threads) / time.Since(start).Seconds() / 1e9
		best = max(best, gbs)
	}
	return best
}

// MeasureReadBandwidth estimates how fast threads goroutines read memory,
// in GB/s, each streaming its own 128 MiB, which no cache holds, with k's
// loads (kernels.Set.StreamRead): what decoding does to the weights, so
// the bandwidth its roofline is taken from. (Counted as STREAM's copy
// counts, MeasureBandwidth, a machine can give far more than reads alone:
// docs/measurements, "The roofline of decoding".) The best of reps
// passes is reported.
func MeasureReadBandwidth(k *kernels.Set, threads, reps int) float64 {
	const size = 128 << 20
	bufs := make([][]byte, threads)
	for i := range bufs {
		bufs[i] = make([]byte, size)
		for j := 0; j < size; j += 4096 {
			bufs[i][j] = byte(j >> 12) // touch every page
		}
	}
	best := 0.0
	for range reps {
		var wg sync.WaitGroup
		start := time.Now()
		for _, b := range bufs {
			wg.Go(func() { k.StreamRead(b) })
		}
		wg.Wait()
		best = max(best, float64(size*threads)/time.Since(start).Seconds()/1e9)
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
