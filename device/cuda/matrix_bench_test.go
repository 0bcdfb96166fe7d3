package cuda

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"dovetail/device"
	"dovetail/internal/golden"
	"dovetail/models"
	"dovetail/offload"
	"dovetail/quant"
)

// The products of matrices in their blocks on the shapes of an 8B's
// layers (4096×4096: attention; 14336×4096: gate and up; 4096×14336:
// down), for decode (n = 1) and a tree's verification (n = 16). MB/s is
// the weights' bytes a product: set it against BenchmarkCUDACopy's, the
// rate at which the device reads and writes its own memory.
func BenchmarkCUDABlockProduct(b *testing.B) {
	dev := cudaOrSkip(b)
	mats := map[string]device.Matrix{}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, bt := range blockTypes {
		for _, sh := range [][2]int{{4096, 4096}, {14336, 4096}, {4096, 14336}} {
			rows, cols := sh[0], sh[1]
			rb, _ := bt.t.RowSize(cols)
			key := fmt.Sprintf("%v/%dx%d", bt.t, rows, cols)
			for _, n := range []int{1, 16} {
				b.Run(fmt.Sprintf("%s/n=%d", key, n), func(b *testing.B) {
					m := mats[key]
					if m == nil {
						m = randomBlocks(b, dev, bt.t, rows, cols, rng)
						mats[key] = m
					}
					x, out := dev.Alloc(n*cols), dev.Alloc(n*rows)
					defer dev.Free(x)
					defer dev.Free(out)
					dev.MatMulFrozen(out, x, m, n) // the scratch grown before timing
					b.SetBytes(int64(rows * rb))
					b.ResetTimer()
					for range b.N {
						dev.MatMulFrozen(out, x, m, n)
					}
					dev.Download(make([]float32, 1), out) // waits for the stream
				})
			}
		}
	}
}

// randomBlocks is a rows×cols matrix of random blocks with finite scales:
// their values do not change a product's speed, and quantizing 58 million
// values would take longer than the benchmark.
func randomBlocks(b *testing.B, dev device.Device, typ quant.Type, rows, cols int, rng *rand.Rand) device.Matrix {
	rb, err := typ.RowSize(cols)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, rows*rb)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	for r := range rows {
		finiteScales(typ, data[r*rb:(r+1)*rb], rng)
	}
	m, err := dev.UploadMatrix(&models.Tensor{Name: typ.String(), Type: typ, Rows: rows, Cols: cols, RowBytes: rb, Data: data})
	if err != nil {
		b.Fatal(err)
	}
	return m
}

// BenchmarkCUDACopy copies 256 MiB within the device: MB/s counts the
// bytes read and written, the most a kernel that reads its weights once
// could approach.
func BenchmarkCUDACopy(b *testing.B) {
	dev := cudaOrSkip(b)
	const n = 64 << 20 // values
	src, dst := dev.Alloc(n), dev.Alloc(n)
	defer dev.Free(src)
	defer dev.Free(dst)
	dev.Copy(dst, src)
	b.SetBytes(2 * 4 * n)
	b.ResetTimer()
	for range b.N {
		dev.Copy(dst, src)
	}
	dev.Download(make([]float32, 1), dst)
}

// BenchmarkCUDALayerStep times a decode step (n = 1) and a tree's
// verification (n = 16) through the target's offloaded layers of a model
// whose weights are a few hundred kilobytes (tinystories656K): its
// layers' time is the device path's own cost, launches and waits, not
// memory traffic. µs/layer is a step with every layer on the device less
// one with the last only, over the layers between: what a layer adds.
// Each shape runs with its launches replayed as a graph and without.
func BenchmarkCUDALayerStep(b *testing.B) {
	dev := cudaOrSkip(b).(*cudaDev)
	m, err := models.LoadLlama(golden.ModelPath("tinystories656K-Q8_0.gguf"))
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	c := m.Config
	// With graphs (a step's launches replayed as one, graph.go) and
	// without, side by side.
	defer func(off bool) { dev.noGraphs = off }(dev.noGraphs)
	for _, tc := range []struct {
		n      int
		graphs bool
	}{{1, true}, {1, false}, {16, true}, {16, false}} {
		n := tc.n
		dev.noGraphs = !tc.graphs || dev.l.graph == nil
		b.Run(fmt.Sprintf("n=%d/graphs=%v", n, tc.graphs), func(b *testing.B) {
			step := func(from int) time.Duration {
				l, err := offload.New(dev, m, from)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Free()
				const ctx = 512
				s, err := l.NewSeq(ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Free()
				x, pos := make([]float32, n*c.Hidden), make([]int, n)
				hidden, logits := make([]float32, n*c.Hidden), make([]float32, c.Vocab)
				run := func(i int) {
					past := (i * n) % (ctx - n)
					for j := range pos {
						pos[j] = past + j
					}
					if err := s.Forward(x, n, pos, past, 0, nil, n-1, hidden, logits); err != nil {
						b.Fatal(err)
					}
				}
				run(0)
				start := time.Now()
				for i := range b.N {
					run(i + 1)
				}
				return time.Since(start) / time.Duration(b.N)
			}
			one, all := step(c.Layers-1), step(0)
			b.ReportMetric(float64(all.Microseconds()), "µs/step")
			b.ReportMetric(float64(all-one)/float64(c.Layers-1)/1e3, "µs/layer")
		})
	}
}

// BenchmarkCUDALaunch times 256 launches of a tiny kernel (an Add of 256
// values) in a row: "host-µs/launch" until the last is queued, "µs/launch"
// until the device has run them all. Where the two are close the host's
// launches bound a layer's cost (what CUDA graphs would cut); where the
// second is larger, the device's gaps between kernels do.
func BenchmarkCUDALaunch(b *testing.B) {
	dev := cudaOrSkip(b)
	const launches, n = 256, 256
	x, out := dev.Alloc(n), dev.Alloc(n)
	defer dev.Free(x)
	defer dev.Free(out)
	wait := func() { dev.Download(make([]float32, 1), dev.View(out, 0, 1)) }
	dev.Add(out, x, x)
	wait()
	var queued, done time.Duration
	for range b.N {
		start := time.Now()
		for range launches {
			dev.Add(out, x, out)
		}
		queued += time.Since(start)
		wait()
		done += time.Since(start)
	}
	b.ReportMetric(float64(queued.Microseconds())/float64(b.N*launches), "host-µs/launch")
	b.ReportMetric(float64(done.Microseconds())/float64(b.N*launches), "µs/launch")
}
