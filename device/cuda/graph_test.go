package cuda

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"dovetail/device"
	"dovetail/models"
	"dovetail/offload"
	"dovetail/quant"
)

// Decode steps and tree passes of the offloaded layers replayed as graphs
// give, bit for bit, what the same steps give launched one by one (a
// second device with graphs off): one graph launch a step after a key's
// first, and no node updated: what a step changes (positions, a mask, the
// cache slot, the count of keys) goes to the graph's arena, at fixed
// addresses.
func TestCUDAGraphedSteps(t *testing.T) {
	dev, ref, m := graphsAndNot(t)
	c := m.Config
	type side struct {
		d *cudaDev
		s *offload.Seq
	}
	var sides []side
	for _, d := range []*cudaDev{dev, ref} {
		l, err := offload.New(d, m, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Free()
		s, err := l.NewSeq(64)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Free()
		sides = append(sides, side{d, s})
	}
	x := make([]float32, 8*c.Hidden)
	step := func(what string, n int, pos []int, past int, mask []uint8) {
		for i := range x[:n*c.Hidden] {
			x[i] = float32((i*7+past*13)%19-9) / 4
		}
		var got [2][]float32
		for k, sd := range sides {
			hidden, logits := make([]float32, n*c.Hidden), make([]float32, n*c.Vocab)
			if err := sd.s.Forward(x, n, pos, past, 0, mask, 0, hidden, logits); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			got[k] = append(hidden, logits...)
		}
		for j := range got[0] {
			if got[0][j] != got[1][j] {
				t.Fatalf("%s: value %d is %g with graphs, %g without", what, j, got[0][j], got[1][j])
			}
		}
	}
	launches, updates := dev.graphLaunches, dev.nodeUpdates
	const steps = 6
	for p := range steps {
		step(fmt.Sprintf("decode step at %d", p), 1, []int{p}, p, nil)
	}
	if got := dev.graphLaunches - launches; got != steps-1 {
		t.Errorf("%d decode steps launched %d graphs, want %d", steps, got, steps-1)
	}
	if got := dev.nodeUpdates - updates; got != 0 {
		t.Errorf("%d replays updated %d nodes, want none: what a step changes is in the arena", steps-1, got)
	}
	// A tree of 4 nodes (a root and three children) at two places, then
	// decoding again: each shape its own graph.
	mask := []uint8{1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 0, 0, 1}
	launches = dev.graphLaunches
	for _, past := range []int{steps, steps + 5, steps + 9} {
		p := []int{past, past + 1, past + 1, past + 1}
		step(fmt.Sprintf("tree at %d", past), 4, p, past, mask)
	}
	step("decode after the trees", 1, []int{steps + 20}, steps+20, nil)
	if got := dev.graphLaunches - launches; got != 3 {
		t.Errorf("three trees of one shape and a decode step launched %d graphs, want 3", got)
	}
}

// graphsAndNot is the tests' device, another of its GPU with graphs off,
// and a model to run on both.
func graphsAndNot(t *testing.T) (dev, ref *cudaDev, m *models.Llama) {
	dev = cudaOrSkip(t).(*cudaDev)
	ref = openAnother(t).(*cudaDev)
	t.Cleanup(ref.Close)
	ref.noGraphs = true
	return dev, ref, synthModel(t, "dim=256,layers=3,heads=4,kv=2,ffn=512,vocab=300", quant.Q4_K)
}

// What a replay cannot launch as its graph it launches one by one, in
// order: a run that downloads midway, one with another kernel, one with
// one fewer, one that panics. A recording that downloads makes no graph.
func TestCUDAGraphedFallbacks(t *testing.T) {
	dev := cudaOrSkip(t).(*cudaDev)
	const n = 300
	x, y := dev.Alloc(n), dev.Alloc(n)
	defer dev.Free(x)
	defer dev.Free(y)
	in := make([]float32, n)
	mid, out := make([]float32, n), make([]float32, n)
	// run: y = x+x, then (adds more times) y += x; mid is y after the
	// first add where download is set.
	run := func(key string, v float32, adds int, download bool) {
		for i := range in {
			in[i] = v + float32(i)
		}
		dev.Upload(x, in)
		device.Graphed(dev, key, func() {
			dev.Add(y, x, x)
			if download {
				dev.Download(mid, y)
			}
			for range adds {
				dev.Add(y, y, x)
			}
		})
		dev.Download(out, y)
		for i := range out {
			if want := float32(2+adds) * in[i]; out[i] != want {
				t.Fatalf("%s, %d adds, download %v: value %d is %g, want %g", key, adds, download, i, out[i], want)
			}
			if download && mid[i] != 2*in[i] {
				t.Fatalf("%s: midway value %d is %g, want %g", key, i, mid[i], 2*in[i])
			}
		}
	}
	graphs := func(what string, want int, do func()) {
		t.Helper()
		before := dev.graphLaunches
		do()
		if got := dev.graphLaunches - before; got != want {
			t.Errorf("%s: %d graph launches, want %d", what, got, want)
		}
	}
	// Each case's runs of key "a" go after the ones before: the graph is
	// the last recording's.
	for _, c := range []struct {
		what string
		want int
		runs [][2]int // adds, download (1)
	}{
		{"record, then replay with new values", 2, [][2]int{{1, 0}, {1, 0}, {1, 0}}},
		{"a replay that downloads midway, then a plain one", 1, [][2]int{{1, 1}, {1, 0}}},
		{"a replay with another kernel, a recording, a replay", 1, [][2]int{{2, 0}, {2, 0}, {2, 0}}},
		{"a replay with one kernel fewer, a recording, a replay", 1, [][2]int{{1, 0}, {1, 0}, {1, 0}}},
	} {
		graphs(c.what, c.want, func() {
			for i, r := range c.runs {
				run("a", float32(i+1), r[0], r[1] == 1)
			}
		})
	}
	graphs("a replay whose first kernel is another, a recording, a replay", 1, func() {
		// y = x, a concatenation of its halves, instead of x+x.
		device.Graphed(dev, "a", func() {
			dev.Concat(y, dev.View(x, 0, n/2), dev.View(x, n/2, n/2), 1, n/2, n/2)
			dev.Add(y, y, x)
		})
		dev.Download(out, y)
		for i := range out {
			if want := 2 * in[i]; out[i] != want {
				t.Fatalf("another first kernel: value %d is %g, want %g", i, out[i], want)
			}
		}
		run("a", 12, 1, false)
		run("a", 13, 1, false)
	})
	// A replay whose buffers moved updates its nodes to them.
	moved := func(off int) {
		const m = 100
		dev.Upload(x, in)
		dev.Zero(y)
		device.Graphed(dev, "moved", func() {
			dev.Add(dev.View(y, off, m), dev.View(x, off, m), dev.View(x, off, m))
		})
		dev.Download(out, y)
		for i := range out {
			want := float32(0)
			if i >= off && i < off+m {
				want = 2 * in[i]
			}
			if out[i] != want {
				t.Fatalf("an Add of [%d, %d): value %d is %g, want %g", off, off+m, i, out[i], want)
			}
		}
	}
	updates := dev.nodeUpdates
	graphs("an Add recorded, then replayed on other views", 2, func() {
		moved(0)
		moved(32)
		moved(64)
	})
	if dev.nodeUpdates-updates != 2 {
		t.Errorf("two replays on moved views updated %d nodes, want 2", dev.nodeUpdates-updates)
	}
	// A replay's host arguments reach the device before the launches
	// that read them, whether it goes as its graph or one by one.
	rope := func(p int, download bool) {
		dev.Upload(x, in)
		dev.Upload(y, in)
		device.Graphed(dev, "rope", func() {
			dev.RoPE(y, []int{p}, 5, n/5, 10000)
			if download {
				dev.Download(mid, y)
			}
		})
		dev.RoPE(x, []int{p}, 5, n/5, 10000) // outside any graph
		want := make([]float32, n)
		dev.Download(out, y)
		dev.Download(want, x)
		for i := range out {
			if out[i] != want[i] {
				t.Fatalf("RoPE at %d, download %v: value %d is %g, want %g", p, download, i, out[i], want[i])
			}
		}
	}
	graphs("RoPE recorded, replayed, replayed with a download", 1, func() {
		rope(1, false)
		rope(2, false)
		rope(3, true)
	})
	graphs("recordings that download", 0, func() {
		for i := range maxImpure {
			run("b", float32(i), 1, true)
		}
		run("b", 10, 1, false)
		run("b", 11, 1, false)
	})
	graphs("a replay that panics", 0, func() {
		run("c", 1, 0, false)
		func() {
			defer func() {
				if recover() == nil {
					t.Error("the run's panic was lost")
				}
			}()
			device.Graphed(dev, "c", func() {
				dev.Add(y, x, x)
				panic("stop")
			})
		}()
		dev.Download(out, y)
		for i := range out {
			if out[i] != 2*in[i] {
				t.Fatalf("after a replay that panicked: value %d is %g, want %g", i, out[i], 2*in[i])
			}
		}
	})
	graphs("after the panic, a recording, a replay", 1, func() {
		run("c", 2, 0, false)
		run("c", 3, 0, false)
	})
}

// Sequences of one set of layers decoding at once (parallel slots) each
// replay their steps as graphs, and give what they give one after the
// other on a device with graphs off.
func TestCUDAGraphedParallelSequences(t *testing.T) {
	dev, ref, m := graphsAndNot(t)
	c := m.Config
	const seqs, steps = 3, 6
	// decode runs steps decode steps of sequence i on l, returning each
	// step's hidden state and logits.
	decode := func(l *offload.Layers, i int) ([][]float32, error) {
		s, err := l.NewSeq(32)
		if err != nil {
			return nil, err
		}
		defer s.Free()
		var outs [][]float32
		x := make([]float32, c.Hidden)
		for p := range steps {
			for j := range x {
				x[j] = float32((j*5+p*11+i*3)%17-8) / 4
			}
			hidden, logits := make([]float32, c.Hidden), make([]float32, c.Vocab)
			if err := s.Forward(x, 1, []int{p}, p, 0, nil, 0, hidden, logits); err != nil {
				return nil, err
			}
			outs = append(outs, append(hidden, logits...))
		}
		return outs, nil
	}
	layers := func(d *cudaDev) *offload.Layers {
		l, err := offload.New(d, m, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(l.Free)
		return l
	}
	lg, lr := layers(dev), layers(ref)
	var want, got [seqs][][]float32
	for i := range seqs {
		var err error
		if want[i], err = decode(lr, i); err != nil {
			t.Fatal(err)
		}
	}
	before := dev.graphLaunches
	var wg sync.WaitGroup
	errs := make([]error, seqs)
	for i := range seqs {
		wg.Go(func() { got[i], errs[i] = decode(lg, i) })
	}
	wg.Wait()
	for i := range seqs {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		for p := range steps {
			if !slices.Equal(got[i][p], want[i][p]) {
				t.Fatalf("sequence %d, step %d: outputs differ in parallel with graphs", i, p)
			}
		}
	}
	if n := dev.graphLaunches - before; n != seqs*(steps-1) {
		t.Errorf("%d sequences of %d steps in parallel launched %d graphs, want %d", seqs, steps, n, seqs*(steps-1))
	}
}
