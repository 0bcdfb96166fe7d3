package cpu

import (
	"slices"
	"sync"
	"time"

	"dovetail/models"
)

// BandwidthPasses estimates memory bandwidth in GB/s, counted as STREAM's
// copy counts it (bytes read plus bytes written), with threads goroutines
// each copying its own 64 MiB, passes times over the same buffers: each
// pass's GB/s, for a figure that a pass served from cache, or one slowed
// by a neighbour, does not move (probe takes their median). A large
// last-level cache keeps part of the buffers between passes and reads
// them faster than memory (docs/measurements/kernels.md, "The roofline,
// read from the weights").
func BandwidthPasses(threads, passes int) []float64 {
	const size = 64 << 20
	src, dst := touchedBuffers(threads, size), touchedBuffers(threads, size)
	return timePasses(max(passes, 1), 2*size*threads, func(wg *sync.WaitGroup) {
		for i := range src {
			wg.Go(func() { copy(dst[i], src[i]) })
		}
	})
}

// MeasureWeightRead measures how fast threads goroutines read the weights one
// decode step reads on the CPU, each streaming its share of every matrix with
// f.K's loads (kernels.Set.StreamRead) as decoding streams them: the packed
// copies where f has them, else the file's bytes. It returns the best of reps
// passes in GB/s and the bytes a pass reads. One decode step can be no faster
// than this read of its weights: it is decoding's roofline. A buffer of the
// read's own would not be the same memory: one of 128 MiB, read pass after
// pass, was partly served from a 32 MiB L3 and read 15% faster than a
// gigabyte does (docs/measurements/kernels.md, "The roofline, read from the
// weights").
func (f *Fast) MeasureWeightRead(threads, reps int) (gbs float64, bytes int64) {
	threads = max(1, threads)
	shares := make([][][]byte, threads)
	for _, b := range f.decodeMemory() {
		lines := len(b) / 64
		for t := range threads {
			lo, hi := lines*t/threads*64, lines*(t+1)/threads*64
			if hi > lo {
				shares[t] = append(shares[t], b[lo:hi])
				bytes += int64(hi - lo)
			}
		}
	}
	gbs = bestPass(reps, int(bytes), func(wg *sync.WaitGroup) {
		for _, share := range shares {
			wg.Go(func() {
				for _, b := range share {
					f.K.StreamRead(b)
				}
			})
		}
	})
	return gbs, bytes
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
	return slices.Max(timePasses(max(reps, 1), bytes, start))
}

// timePasses is each pass's rate in GB/s.
func timePasses(reps, bytes int, start func(wg *sync.WaitGroup)) []float64 {
	rates := make([]float64, reps)
	for i := range rates {
		var wg sync.WaitGroup
		t := time.Now()
		start(&wg)
		wg.Wait()
		rates[i] = float64(bytes) / time.Since(t).Seconds() / 1e9
	}
	return rates
}

// WeightBytesPerToken is the weight memory one decode step reads on the
// CPU: every matrix but the token embedding, of which only one row is read
// (unless it doubles as the output matrix).
func (f *Fast) WeightBytesPerToken() int64 {
	var n int64
	for _, t := range f.decodeMatrices() {
		n += int64(len(t.Data))
	}
	return n
}

// decodeMatrices are the matrices one decode step multiplies on the CPU:
// its layers' and, unless layers run elsewhere, the output.
func (f *Fast) decodeMatrices() []*models.Tensor {
	var ts []*models.Tensor
	if f.off == nil {
		ts = append(ts, f.M.Output)
	}
	for i := range f.cpuLayers() {
		l := &f.M.Layers[i]
		ts = append(ts, l.Q, l.K, l.V, l.O, l.Gate, l.Up, l.Down)
	}
	return ts
}

// decodeMemory is where decodeMatrices' bytes lie: their packed copies, or
// the file's bytes for those not packed.
func (f *Fast) decodeMemory() [][]byte {
	var bufs [][]byte
	for _, t := range f.decodeMatrices() {
		if p := f.packed[t]; p != nil {
			bufs = append(bufs, p.Memory())
		} else {
			bufs = append(bufs, t.Data)
		}
	}
	return bufs
}
