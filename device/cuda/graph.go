package cuda

import (
	"bytes"
	"os"
	"unsafe"

	"dovetail/device"
)

// CUDA graphs. A decode step of the offloaded layers is nine kernels a
// layer, each a driver call on the host; where the host's calls are
// slower than the kernels they queue, the GPU waits between them.
// Graphed records the launches of a run of operations that its caller
// repeats with the same shapes (a decode step of n rows); the next run of
// the same key replays them: its launches are collected rather than made,
// checked against the graph's nodes (the same kernels and shapes in the
// same order), the nodes whose arguments changed are updated, and the
// graph is launched once. In a decode step none change: what a step
// changes (positions, a mask, the cache slot, the count of keys) the
// kernels read from device memory, as host arguments.
//
// The stream sees the same work in the same order either way. Anything
// else put on the stream during a replay (a copy, a download, a cuBLAS
// product, a wait) first launches what the run collected, one by one, and
// the run goes on without its graph; a recording that did such things
// makes no graph. A run's small host arguments go to an arena of the
// graph's own, at the same offsets every run and uploaded
// only where they changed, so the nodes that read them keep their
// arguments. A replay uploads what changed of them in one copy, before
// the graph.

// graphArenaBytes is the device memory a graph keeps for its runs' host
// arguments: a 64-node tree's mask and positions fit many times over.
const graphArenaBytes = 64 << 10

// maxGraphs is how many graphs a device keeps (a key each: a sequence and
// a tree size, say); the least recently used goes first.
const maxGraphs = 64

// maxImpure is how many recordings of a key may do more than launch
// kernels before its runs are left to launch one by one.
const maxImpure = 3

// launchRec is one kernel launch: what cuLaunchKernel takes, the
// arguments by value.
type launchRec struct {
	name        string
	fn          uintptr
	grid, block [3]uint32
	shared      uint32
	val         [24]uint64
}

func (r *launchRec) sameShape(o *launchRec) bool {
	return r.fn == o.fn && r.grid == o.grid && r.block == o.block && r.shared == o.shared
}

// graph is what a key's runs made: the recorded launches as a chain of
// kernel nodes, instantiated.
type graph struct {
	key     any
	g, exec uintptr     // 0 until a clean recording
	nodes   []uintptr   // exec's kernel nodes, in launch order
	recs    []launchRec // what each node launches now
	arena   uint64      // graphArenaBytes of device memory for the runs' host arguments
	host    []byte      // the arena's contents, as uploaded
	used    uint64      // the device's graph clock at its last run
	impure  int         // recordings that did more than launch kernels
	stale   bool        // a replay found other launches: recorded afresh next run
}

// never says that g's runs do more than launch kernels: no graph is made,
// and they run as they are.
func (g *graph) never() bool { return g.impure >= maxImpure }

type runMode int

const (
	recording runMode = iota // launches are made and kept
	replaying                // launches are collected, to go as the graph
	direct                   // a replay given up: launches are made
)

// graphRun is the state of a Graphed call.
type graphRun struct {
	g      *graph
	mode   runMode
	recs   []launchRec
	impure bool     // recording: other work went on the stream
	off    int      // arena bytes handed out this run
	spans  [][2]int // this run's host arguments in the arena: offset, bytes
	dirty  [2]int   // a replay's arena bytes not uploaded yet: [from, to)
}

// graphsOff reports whether DOVETAIL_CUDA_GRAPHS=off asks for every
// launch on its own (to compare the two).
func graphsOff() bool { return os.Getenv("DOVETAIL_CUDA_GRAPHS") == "off" }

// Graphed runs fn, operations on d, as a graph where one is recorded for
// key (device.Graphed).
func (d *cudaDev) Graphed(key any, fn func()) {
	r := d.startRun(key)
	if r == nil {
		fn()
		return
	}
	done := false
	defer func() {
		if !done {
			d.abandon(r)
		}
	}()
	fn()
	done = true
	d.enter()
	defer d.leave()
	d.finish(r)
}

// startRun begins a run of key's graph: a recording or a replay. nil
// where fn is to run as it is: no graphs, a run under way (Graphed
// inside Graphed), a key whose runs do more than launch, or no memory
// for the arena.
func (d *cudaDev) startRun(key any) *graphRun {
	d.enter()
	defer d.leave()
	if d.noGraphs || d.run != nil {
		return nil
	}
	g := d.graphFor(key)
	if g == nil || g.never() {
		return nil
	}
	// A step's few hundred launches are collected into the last run's
	// slices, not new ones.
	r := &graphRun{g: g, mode: recording, recs: d.runRecs[:0], spans: d.runSpans[:0]}
	if g.exec != 0 {
		r.mode = replaying
	}
	d.run = r
	return r
}

// graphFor is key's graph, made (with its arena) where there is none;
// nil where the GPU has no memory for the arena.
func (d *cudaDev) graphFor(key any) *graph {
	g := d.graphs[key]
	if g == nil {
		if len(d.graphs) >= maxGraphs {
			var lru *graph
			for _, o := range d.graphs {
				if lru == nil || o.used < lru.used {
					lru = o
				}
			}
			d.freeGraph(lru)
		}
		var arena uint64
		if d.l.call(d.l.memAlloc, uintptr(unsafe.Pointer(&arena)), graphArenaBytes) != 0 {
			return nil
		}
		g = &graph{key: key, host: make([]byte, graphArenaBytes), arena: arena}
		d.l.must("cuMemsetD32Async", d.l.call(d.l.memsetD32, uintptr(g.arena), 0, graphArenaBytes/4, d.stream))
		if d.graphs == nil {
			d.graphs = map[any]*graph{}
		}
		d.graphs[key] = g
	}
	if g.stale {
		d.dropExec(g)
	}
	d.graphClock++
	g.used = d.graphClock
	return g
}

// collect takes a launch of the run: true where it is kept for the graph,
// false where the caller is to make it now.
func (d *cudaDev) collect(r *graphRun, rec *launchRec) bool {
	switch r.mode {
	case recording:
		r.recs = append(r.recs, *rec)
		return false
	case replaying:
		if i := len(r.recs); i >= len(r.g.recs) || !r.g.recs[i].sameShape(rec) {
			r.g.stale = true
			d.streamWork()
			return false
		}
		r.recs = append(r.recs, *rec)
		return true
	}
	return false
}

// streamWork comes before work on the stream other than a kernel launch
// or a run's host arguments: a replay launches what it collected, one by
// one, and goes on without its graph; a recording will make none.
func (d *cudaDev) streamWork() {
	if r := d.run; r != nil && r.mode == recording {
		r.impure = true
	}
	d.flushReplay()
}

// flushReplay launches what a replay collected, one by one, and lets the
// run go on without its graph. Scratch that grows calls it alone: the
// collected launches read the old memory, but a recording's nodes that
// do are updated when their graph is replayed, as any changed value is.
func (d *cudaDev) flushReplay() {
	if r := d.run; r != nil && r.mode == replaying {
		r.mode = direct
		d.uploadDirty(r)
		for i := range r.recs {
			d.launchNow(&r.recs[i])
		}
		r.recs = r.recs[:0]
	}
}

// finish ends a run: a clean recording becomes the key's graph; a replay
// updates the nodes whose arguments changed and launches the graph.
func (d *cudaDev) finish(r *graphRun) {
	g := r.g
	defer func() { d.runRecs, d.runSpans = r.recs[:0], r.spans[:0] }()
	if r.mode == replaying && len(r.recs) != len(g.recs) {
		g.stale = true
		d.flushReplay()
	}
	d.run = nil
	switch {
	case r.mode == recording && (r.impure || len(r.recs) == 0):
		// A first run often grows the scratch (a wait): a key's runs get
		// a few recordings before they are left alone.
		g.impure++
	case r.mode == recording:
		d.makeGraph(g, r.recs)
	case r.mode == replaying:
		d.uploadDirty(r)
		d.replay(g, r.recs)
	}
}

// abandon ends a run that panicked: what it collected is launched, as it
// would have been, and the key's graph is recorded afresh next time.
func (d *cudaDev) abandon(r *graphRun) {
	d.enter()
	defer d.leave()
	if d.run != r {
		return
	}
	r.g.stale = true
	defer func() {
		d.run = nil
		recover() // the run's own panic is the one that goes on
	}()
	d.streamWork()
}

// kernelNodeParams is CUDA_KERNEL_NODE_PARAMS_v2; the first version reads
// the fields up to extra.
type kernelNodeParams struct {
	fn                     uintptr
	gx, gy, gz, bx, by, bz uint32
	shared                 uint32
	params, extra          uintptr
	kern, ctx              uintptr
}

// nodeParams describes rec as a kernel node, its arguments in the device's
// pinned argument block (the driver copies them).
func (d *cudaDev) nodeParams(rec *launchRec) kernelNodeParams {
	d.args.val = rec.val
	return kernelNodeParams{fn: rec.fn, gx: rec.grid[0], gy: rec.grid[1], gz: rec.grid[2],
		bx: rec.block[0], by: rec.block[1], bz: rec.block[2], shared: rec.shared,
		params: uintptr(unsafe.Pointer(&d.args.ptr[0]))}
}

// makeGraph chains recs as kernel nodes, each after the one before, and
// instantiates the graph. A driver that refuses leaves the device without
// graphs: every launch then goes on its own, as before.
func (d *cudaDev) makeGraph(g *graph, recs []launchRec) {
	gl := d.l.graph
	ok := func(r uintptr) bool {
		if r != 0 {
			d.noGraphs = true
			d.dropExec(g)
		}
		return r == 0
	}
	if !ok(d.l.call(gl.create, uintptr(unsafe.Pointer(&g.g)), 0)) {
		return
	}
	g.nodes = make([]uintptr, len(recs))
	for i := range recs {
		p := d.nodeParams(&recs[i])
		var r uintptr
		if i == 0 {
			r = d.l.call(gl.addKernelNode, uintptr(unsafe.Pointer(&g.nodes[i])), g.g, 0, 0, uintptr(unsafe.Pointer(&p)))
		} else {
			r = d.l.call(gl.addKernelNode, uintptr(unsafe.Pointer(&g.nodes[i])), g.g,
				uintptr(unsafe.Pointer(&g.nodes[i-1])), 1, uintptr(unsafe.Pointer(&p)))
		}
		if !ok(r) {
			return
		}
	}
	if !ok(d.l.call(gl.instantiate, uintptr(unsafe.Pointer(&g.exec)), g.g, 0)) {
		return
	}
	g.recs = append([]launchRec(nil), recs...)
}

// replay updates the graph's nodes whose arguments differ from this
// run's and launches it.
func (d *cudaDev) replay(g *graph, recs []launchRec) {
	for i := range recs {
		if recs[i].val == g.recs[i].val {
			continue
		}
		p := d.nodeParams(&recs[i])
		if r := d.l.call(d.l.graph.setParams, g.exec, g.nodes[i], uintptr(unsafe.Pointer(&p))); r != 0 {
			// A node that will not take them: this run's launches go
			// one by one, and the key records afresh.
			g.stale = true
			for j := range recs {
				d.launchNow(&recs[j])
			}
			return
		}
		g.recs[i].val = recs[i].val
		d.nodeUpdates++
	}
	d.l.must("cuGraphLaunch", d.l.call(d.l.graph.launch, g.exec, d.stream))
	d.graphLaunches++
}

// runArgs puts a run's host arguments b in its graph's arena, uploading
// them where the arena does not hold them already, and returns their
// address; false where the arena is full.
func (d *cudaDev) runArgs(r *graphRun, b []byte) (uint64, bool) {
	g := r.g
	for _, s := range r.spans {
		if s[1] == len(b) && bytes.Equal(g.host[s[0]:s[0]+s[1]], b) {
			return g.arena + uint64(s[0]), true
		}
	}
	off := (r.off + 255) &^ 255
	if off+len(b) > graphArenaBytes {
		return 0, false
	}
	r.off = off + len(b)
	r.spans = append(r.spans, [2]int{off, len(b)})
	if h := g.host[off : off+len(b)]; !bytes.Equal(h, b) {
		copy(h, b)
		if r.mode != replaying {
			d.stageUpload(g.arena+uint64(off), unsafe.Pointer(&b[0]), len(b))
		} else if r.dirty[1] == 0 {
			r.dirty = [2]int{off, off + len(b)}
		} else {
			r.dirty[1] = off + len(b)
		}
	}
	return g.arena + uint64(off), true
}

// uploadDirty uploads what a replay changed of its arena, in one copy,
// before the launches that read it.
func (d *cudaDev) uploadDirty(r *graphRun) {
	if from, to := r.dirty[0], r.dirty[1]; to > from {
		d.stageUpload(r.g.arena+uint64(from), unsafe.Pointer(&r.g.host[from]), to-from)
	}
	r.dirty = [2]int{}
}

// dropExec destroys g's graph and its instance, after the stream's work
// (a launch of it may be queued); the arena stays.
func (d *cudaDev) dropExec(g *graph) {
	if g.exec != 0 || g.g != 0 {
		d.sync()
	}
	if g.exec != 0 {
		d.l.call(d.l.graph.execDestroy, g.exec)
	}
	if g.g != 0 {
		d.l.call(d.l.graph.destroy, g.g)
	}
	g.g, g.exec, g.nodes, g.recs, g.stale = 0, 0, nil, nil, false
}

// freeGraph drops g and frees its arena.
func (d *cudaDev) freeGraph(g *graph) {
	d.dropExec(g)
	d.sync()
	d.l.call(d.l.memFree, uintptr(g.arena))
	delete(d.graphs, g.key)
}

// GraphLaunches is how many graphs d (a CUDA device) has launched, and
// how many of their nodes it updated: what a test or a benchmark reads
// to see that replays happen. 0, 0 for other devices.
func GraphLaunches(d device.Device) (launches, updates int) {
	c, ok := d.(*cudaDev)
	if !ok {
		return 0, 0
	}
	c.op.Lock()
	defer c.op.Unlock()
	return c.graphLaunches, c.nodeUpdates
}
