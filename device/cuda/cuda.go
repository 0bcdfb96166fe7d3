package cuda

import (
	_ "embed"
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"dovetail/device"
)

// kernelsPTX is kernels.cu compiled by `make ptx`; quantPTX is quant.cu.
var (
	//go:embed kernels.ptx
	kernelsPTX string
	//go:embed quant.ptx
	quantPTX string
)

// cudaCtx is what the devices of one GPU share: the primary context (the
// one cuBLAS uses too) and the loaded kernels.
type cudaCtx struct {
	l       *cuLib
	ordinal int
	ctx     uintptr
	name    string
	fn      map[string]uintptr
	blas    *blasLib
}

var (
	cudaCtxMu sync.Mutex
	cudaCtxs  = map[ctxKey]*cudaCtx{}
)

// ctxKey is a GPU: its driver library and its ordinal there.
type ctxKey struct {
	driver  string
	ordinal int
}

// cudaKernels are the kernels' names in kernels.cu.
var cudaKernels = []string{"gemm", "embed", "silu", "silu_backward", "swiglu", "swiglu_backward", "add",
	"concat", "gate", "gate_backward", "rope", "rmsnorm", "rmsnorm_backward_x", "rmsnorm_backward_w",
	"smoothl1", "soft_cross_entropy", "attention", "attention_h", "attention_backward", "sum", "adamw", "topk",
	"store_half", "rope_qk", "store_half2"}

// quantKernels are quant.cu's: quantize_q8, rmsnorm_q8 and mmvq3, and per
// format of blocks.h its product (mmvq_, or mmv_ for float formats), its
// dequantization, and (8-bit products) the gate's and up's product with
// SwiGLU (mmvq_glu_; mmvq_gluq_ also leaves its output's 8-bit codes).
func quantKernels() []string {
	names := []string{"quantize_q8", "rmsnorm_q8", "mmvq3"}
	for _, f := range blockFormats {
		names = append(names, f.mmv, f.dequant)
		if !f.float {
			names = append(names, f.glu, f.gluq)
		}
	}
	return names
}

// KernelSources names this package's kernel sources and the kernels the
// device looks up in each: what the emulator (cudaemu) compiles and
// registers.
func KernelSources() map[string][]string {
	return map[string][]string{"kernels.cu": cudaKernels, "quant.cu": quantKernels()}
}

func openCtx(lib string, ordinal int) (*cudaCtx, error) {
	cudaCtxMu.Lock()
	defer cudaCtxMu.Unlock()
	key := ctxKey{lib, ordinal}
	if c := cudaCtxs[key]; c != nil {
		return c, nil
	}
	l, err := driver(lib)
	if err != nil {
		return nil, err
	}
	var count int32
	if err := l.check("cuDeviceGetCount", l.call(l.deviceGetCount, uintptr(unsafe.Pointer(&count)))); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDevice, err)
	}
	if ordinal < 0 || ordinal >= int(count) {
		if count == 0 {
			return nil, fmt.Errorf("%w: the driver sees no GPU", ErrNoDevice)
		}
		return nil, fmt.Errorf("CUDA device %d does not exist: there are %d", ordinal, count)
	}
	var dev int32
	if err := l.check("cuDeviceGet", l.call(l.deviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(ordinal))); err != nil {
		return nil, err
	}
	name := make([]byte, 256)
	l.call(l.deviceGetName, uintptr(unsafe.Pointer(&name[0])), 256, uintptr(dev))
	c := &cudaCtx{l: l, ordinal: ordinal, name: goString(&name[0]), fn: map[string]uintptr{}}
	if err := l.check("cuDevicePrimaryCtxRetain", l.call(l.primaryCtxRetain, uintptr(unsafe.Pointer(&c.ctx)), uintptr(dev))); err != nil {
		return nil, err
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	l.must("cuCtxSetCurrent", l.call(l.ctxSetCurrent, c.ctx))
	if err := c.load(kernelsPTX, cudaKernels); err != nil {
		return nil, err
	}
	if err := c.load(quantPTX, quantKernels()); err != nil {
		return nil, err
	}
	c.blas = loadBLAS()
	cudaCtxs[key] = c
	return c, nil
}

// load loads a module's PTX and looks its kernels up.
func (c *cudaCtx) load(ptx string, kernels []string) error {
	l := c.l
	src := append([]byte(ptx), 0)
	var mod uintptr
	if err := l.check("cuModuleLoadData", l.call(l.moduleLoadData, uintptr(unsafe.Pointer(&mod)), uintptr(unsafe.Pointer(&src[0])))); err != nil {
		return fmt.Errorf("loading the CUDA kernels on %s: %w", c.name, err)
	}
	for _, k := range kernels {
		var f uintptr
		kn := append([]byte(k), 0)
		if err := l.check("cuModuleGetFunction "+k, l.call(l.moduleGetFunction, uintptr(unsafe.Pointer(&f)), mod, uintptr(unsafe.Pointer(&kn[0])))); err != nil {
			return err
		}
		c.fn[k] = f
	}
	return nil
}

// cudaDev is a Device on a CUDA GPU. Each cudaDev has its own stream (and
// cuBLAS handle): operations run asynchronously in call order, and a
// Download waits for them. Two cudaDevs of one GPU (the drafter's and the
// trainer's) run concurrently; buffers must not be shared between them
// (Draft.CopyWeights passes through the host between devices).
type cudaDev struct {
	c      *cudaCtx
	l      *cuLib
	stream uintptr
	handle uintptr // cuBLAS, 0 without it

	op   sync.Mutex // one operation at a time: they share the scratch and the argument block
	args *launchArgs
	pin  runtime.Pinner

	scratch [6]cudaBuf // kernel arguments from the host; float work; partial sums; 8-bit activations; dequantized tiles; the 8-bit output of a GLU (its input's are in 3)
	memo    argMemo    // small kernel arguments by their values
	ops     int        // operations entered, for q8
	kernels int        // kernels launched, which tests count per decoder layer
	q8      q8Memo     // the activations scratch slot 3 holds in 8 bits
	stage   []byte     // pinned host memory that uploads go through
	staged  int        // bytes of stage in use since the stream last synchronized
	partial []float64
	topHost []uint32 // TopK's ids and log-probabilities, as downloaded

	graphs        map[any]*graph // Graphed's, by key (graph.go)
	run           *graphRun      // the Graphed call under way, or nil
	runRecs       []launchRec    // the last run's slices, for the next
	runSpans      [][2]int
	graphClock    uint64
	noGraphs      bool // the driver has none, or DOVETAIL_CUDA_GRAPHS=off
	graphLaunches int  // graphs launched, and nodes updated: what tests count
	nodeUpdates   int
}

// launchArgs is cuLaunchKernel's argument array: ptr[i] points at val[i].
// It is pinned, so the driver may read the Go memory.
type launchArgs struct {
	val [24]uint64
	ptr [24]unsafe.Pointer
	one [2]float32 // 1 and 0: cuBLAS's alpha and beta
}

// Open opens GPU ordinal as a Device with a stream of its own. The error
// wraps ErrNoDevice when there is no driver or no GPU.
func Open(ordinal int) (device.Device, error) { return OpenDriver(DriverPath(), ordinal) }

// OpenDriver is Open with the driver library at lib.
func OpenDriver(lib string, ordinal int) (device.Device, error) {
	c, err := openCtx(lib, ordinal)
	if err != nil {
		return nil, err
	}
	d := &cudaDev{c: c, l: c.l, args: &launchArgs{}, noGraphs: c.l.graph == nil || graphsOff()}
	d.pin.Pin(d.args)
	for i := range d.args.ptr {
		d.args.ptr[i] = unsafe.Pointer(&d.args.val[i])
	}
	d.args.one = [2]float32{1, 0}
	d.enter()
	defer d.leave()
	const nonBlocking = 1
	if err := d.l.check("cuStreamCreate", d.l.call(d.l.streamCreate, uintptr(unsafe.Pointer(&d.stream)), nonBlocking)); err != nil {
		return nil, err
	}
	var stage unsafe.Pointer
	if err := d.l.check("cuMemAllocHost", d.l.call(d.l.memAllocHost, uintptr(unsafe.Pointer(&stage)), stageBytes)); err != nil {
		return nil, err
	}
	d.stage = unsafe.Slice((*byte)(stage), stageBytes)
	if b := c.blas; b != nil {
		// A cuBLAS that will not start (a toolkit of another driver's
		// age, say) leaves the GPU to the built-in gemm, which the
		// device's name then says, rather than no GPU at all.
		if r := d.l.call(b.create, uintptr(unsafe.Pointer(&d.handle))); r != 0 {
			d.handle = 0
		} else {
			d.l.call(b.setStream, d.handle, d.stream)
		}
	}
	runtime.SetFinalizer(d, func(d *cudaDev) { d.pin.Unpin() })
	return d, nil
}

// SharesMemory reports whether o is a device of the same GPU (another
// stream): see device.SameMemory.
func (d *cudaDev) SharesMemory(o device.Device) bool {
	c, ok := o.(*cudaDev)
	return ok && c.c == d.c
}

// enter starts an operation: it waits for the device's other users (a
// learner publishing into the drafter's device, say), and makes the
// context current on this goroutine's thread, which it stays on until
// leave: the driver's current context is per thread. Operations do not
// nest: what runs inside calls the unexported helpers.
func (d *cudaDev) enter() {
	d.op.Lock()
	d.ops++
	runtime.LockOSThread()
	d.l.must("cuCtxSetCurrent", d.l.call(d.l.ctxSetCurrent, d.c.ctx))
}

func (d *cudaDev) leave() {
	runtime.UnlockOSThread()
	d.op.Unlock()
}

func (d *cudaDev) Name() string {
	mm := "cuBLAS"
	if d.handle == 0 {
		mm = "built-in matmul, no cuBLAS"
	}
	return fmt.Sprintf("cuda:%d (%s, %s)", d.c.ordinal, d.c.name, mm)
}

// MemInfo returns the GPU's free and total memory in bytes.
func (d *cudaDev) MemInfo() (free, total uint64) {
	d.enter()
	defer d.leave()
	d.l.must("cuMemGetInfo", d.l.call(d.l.memGetInfo, uintptr(unsafe.Pointer(&free)), uintptr(unsafe.Pointer(&total))))
	return free, total
}

// Close waits for the stream's work, then destroys the cuBLAS handle and
// the stream and frees the scratch buffers and the pinned stage. The
// context and kernels stay: other devices of the GPU share them. Closing
// twice does nothing.
func (d *cudaDev) Close() {
	if d.stream == 0 {
		return
	}
	d.enter()
	defer d.leave()
	d.sync()
	for _, g := range d.graphs {
		d.freeGraph(g)
	}
	if d.memo.base != 0 {
		d.l.call(d.l.memFree, uintptr(d.memo.base))
		d.memo = argMemo{}
	}
	for i := range d.scratch {
		if d.scratch[i].p != 0 {
			d.l.call(d.l.memFree, uintptr(d.scratch[i].p))
			d.scratch[i] = cudaBuf{}
		}
	}
	if d.handle != 0 {
		d.l.call(d.c.blas.destroy, d.handle)
		d.handle = 0
	}
	if d.stage != nil {
		d.l.call(d.l.memFreeHost, uintptr(unsafe.Pointer(unsafe.SliceData(d.stage))))
		d.stage = nil
	}
	d.l.call(d.l.streamDestroy, d.stream)
	d.stream = 0
	d.pin.Unpin()
}

// cudaBuf is n float32 values at device address p, or n halves (half: a
// KV cache, see kv.go). A view's root is the allocation it is in.
type cudaBuf struct {
	p    uint64
	n    int
	view bool
	half bool
	root uint64
}

// at is b as an allocation and b's offset in it, in values.
func (b *cudaBuf) at() (root uint64, off int) {
	if !b.view {
		return b.p, 0
	}
	return b.root, int((b.p - b.root) / b.size())
}

// size is the bytes of a value.
func (b *cudaBuf) size() uint64 {
	if b.half {
		return 2
	}
	return 4
}

func (b *cudaBuf) Len() int { return b.n }

func (d *cudaDev) b(x device.Buffer) *cudaBuf {
	cb, ok := x.(*cudaBuf)
	if !ok {
		panic(fmt.Sprintf("cuda: %T is not a buffer of a CUDA device", x))
	}
	return cb
}

// ptr is x's device address, 0 for a nil buffer.
func (d *cudaDev) ptr(x device.Buffer) uint64 {
	if x == nil {
		return 0
	}
	return d.b(x).p
}

func (d *cudaDev) alloc(bytes int) uint64 {
	var p uint64
	if bytes == 0 {
		bytes = 4
	}
	d.l.must(fmt.Sprintf("cuMemAlloc(%d bytes)", bytes), d.l.call(d.l.memAlloc, uintptr(unsafe.Pointer(&p)), uintptr(bytes)))
	return p
}

func (d *cudaDev) Alloc(n int) device.Buffer {
	d.enter()
	defer d.leave()
	p := d.alloc(4 * n)
	d.l.must("cuMemsetD32Async", d.l.call(d.l.memsetD32, uintptr(p), 0, uintptr(n), d.stream))
	return &cudaBuf{p: p, n: n}
}

func (d *cudaDev) Free(x device.Buffer) {
	if x == nil {
		return
	}
	b := d.b(x)
	if b.view || b.p == 0 {
		return
	}
	d.enter()
	defer d.leave()
	// Work queued on the stream may still read it.
	d.sync()
	d.l.must("cuMemFree", d.l.call(d.l.memFree, uintptr(b.p)))
	b.p, b.n = 0, 0
}

func (d *cudaDev) View(x device.Buffer, off, n int) device.Buffer {
	b := d.b(x)
	if off < 0 || n < 0 || off+n > b.n {
		panic(fmt.Sprintf("cuda: view [%d, %d) of a buffer of %d values", off, off+n, b.n))
	}
	root, _ := b.at()
	return &cudaBuf{p: b.p + b.size()*uint64(off), n: n, view: true, half: b.half, root: root}
}

func (d *cudaDev) sync() {
	d.streamWork()
	d.wait()
}

// wait is sync for a scratch that grows (flushReplay).
func (d *cudaDev) wait() {
	d.flushReplay()
	d.l.must("cuStreamSynchronize", d.l.call(d.l.streamSynchronize, d.stream))
	d.staged = 0
}

// stageBytes is the pinned staging memory of a device: a tree level's
// uploads (features, tokens, positions, a mask) fit many times over.
const stageBytes = 1 << 20

// upload copies bytes from host memory at src to p. Small copies go
// through the pinned stage and run asynchronously: a copy from pageable
// memory would first wait for all the stream's work, every time. A slice
// of the stage is reused only after the stream has synchronized (every
// download does), when its copy has surely landed. Larger copies go from
// pageable memory, which the driver stages before returning.
func (d *cudaDev) upload(p uint64, src unsafe.Pointer, bytes int) {
	d.streamWork()
	d.stageUpload(p, src, bytes)
}

// stageUpload is upload without streamWork: a Graphed run's host
// arguments, which its kernels read after them in any case.
func (d *cudaDev) stageUpload(p uint64, src unsafe.Pointer, bytes int) {
	if bytes == 0 {
		return
	}
	if bytes > stageBytes/4 {
		d.l.must("cuMemcpyHtoDAsync", d.l.call(d.l.memcpyHtoD, uintptr(p), uintptr(src), uintptr(bytes), d.stream))
		return
	}
	if d.staged+bytes > stageBytes {
		d.sync()
	}
	dst := d.stage[d.staged : d.staged+bytes]
	copy(dst, unsafe.Slice((*byte)(src), bytes))
	d.staged = (d.staged + bytes + 255) &^ 255
	d.l.must("cuMemcpyHtoDAsync", d.l.call(d.l.memcpyHtoD, uintptr(p), uintptr(unsafe.Pointer(&dst[0])), uintptr(bytes), d.stream))
}

func (d *cudaDev) Upload(dst device.Buffer, src []float32) {
	b := d.f32("Upload", dst)
	if len(src) > b.n {
		panic(fmt.Sprintf("cuda: upload of %d values into a buffer of %d", len(src), b.n))
	}
	if len(src) == 0 {
		return
	}
	d.enter()
	defer d.leave()
	d.upload(b.p, unsafe.Pointer(&src[0]), 4*len(src))
	runtime.KeepAlive(src)
}

func (d *cudaDev) download(dst unsafe.Pointer, p uint64, bytes int) {
	if bytes == 0 {
		return
	}
	d.streamWork()
	d.l.must("cuMemcpyDtoHAsync", d.l.call(d.l.memcpyDtoH, uintptr(dst), uintptr(p), uintptr(bytes), d.stream))
	d.sync()
}

func (d *cudaDev) Download(dst []float32, src device.Buffer) {
	b := d.b(src)
	if b.half {
		d.downloadHalf(dst, b)
		return
	}
	if len(dst) > b.n {
		panic(fmt.Sprintf("cuda: download of %d values from a buffer of %d", len(dst), b.n))
	}
	if len(dst) == 0 {
		return
	}
	d.enter()
	defer d.leave()
	d.download(unsafe.Pointer(&dst[0]), b.p, 4*len(dst))
	runtime.KeepAlive(dst)
}

func (d *cudaDev) Zero(x device.Buffer) {
	b := d.f32("Zero", x)
	if b.n == 0 {
		return
	}
	d.enter()
	defer d.leave()
	d.streamWork()
	d.l.must("cuMemsetD32Async", d.l.call(d.l.memsetD32, uintptr(b.p), 0, uintptr(b.n), d.stream))
}

func (d *cudaDev) Copy(dst, src device.Buffer) {
	db, sb := d.b(dst), d.b(src)
	if db.n != sb.n || db.half != sb.half {
		panic(fmt.Sprintf("cuda: copy of %d values (half %v) into %d (half %v)", sb.n, sb.half, db.n, db.half))
	}
	if db.n == 0 {
		return
	}
	d.enter()
	defer d.leave()
	d.copyBytes(db.p, sb.p, int(db.size()*uint64(db.n)))
}

// copyBytes queues a copy of n bytes from src to dst on the device (none
// where they are the same).
func (d *cudaDev) copyBytes(dst, src uint64, n int) {
	if dst == src || n == 0 {
		return
	}
	d.streamWork()
	d.l.must("cuMemcpyDtoDAsync", d.l.call(d.l.memcpyDtoD, uintptr(dst), uintptr(src), uintptr(n), d.stream))
}

// scratchBytes returns scratch slot i with at least bytes of room. Work
// queued earlier may still use the old memory, so growing waits for it.
func (d *cudaDev) scratchBytes(i, bytes int) uint64 {
	s := &d.scratch[i]
	if s.n < bytes {
		if s.p != 0 {
			d.wait()
			d.l.must("cuMemFree", d.l.call(d.l.memFree, uintptr(s.p)))
		}
		s.n = max(bytes, 2*s.n, 1024)
		s.p = d.alloc(s.n)
	}
	return s.p
}

// hostArgs uploads a kernel's small host-side arguments (positions,
// tokens, a mask) and returns their device address: the address of the
// same values uploaded before where the device's argMemo still holds
// them, else a slot of it, else (large ones) scratch slot 0.
func hostArgs[T int32 | uint8 | float32](d *cudaDev, v []T) uint64 {
	if len(v) == 0 {
		return 0
	}
	bytes := len(v) * int(unsafe.Sizeof(v[0]))
	b := unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), bytes)
	if r := d.run; r != nil {
		if p, ok := d.runArgs(r, b); ok {
			return p
		}
		// The arena is full: the argument memo's slots may be the
		// ones the run's collected launches read.
		d.streamWork()
	}
	if p, ok := d.memo.find(b); ok {
		return p
	}
	var p uint64
	if bytes <= argSlotBytes {
		if d.memo.base == 0 {
			d.memo.base = d.alloc(argSlots * argSlotBytes)
		}
		p = d.memo.put(b)
	} else {
		p = d.scratchBytes(0, bytes)
	}
	d.upload(p, unsafe.Pointer(&v[0]), bytes)
	runtime.KeepAlive(v)
	return p
}

func int32s(v []int) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

// arg kinds for launch: device pointers and 64-bit values go as they are,
// int and float as their 32 bits.
type i32 int32
type f32 float32

func (d *cudaDev) launch(kernel string, grid, block [3]int, shared int, args ...any) {
	rec := launchRec{name: kernel, fn: d.c.fn[kernel], shared: uint32(shared),
		grid:  [3]uint32{uint32(grid[0]), uint32(max(1, grid[1])), uint32(max(1, grid[2]))},
		block: [3]uint32{uint32(block[0]), uint32(max(1, block[1])), uint32(max(1, block[2]))}}
	d.kernels++
	for i, x := range args {
		switch v := x.(type) {
		case uint64:
			rec.val[i] = v
		case int:
			rec.val[i] = uint64(v) // a long in the kernel
		case i32:
			rec.val[i] = uint64(uint32(v))
		case f32:
			rec.val[i] = uint64(math.Float32bits(float32(v)))
		default:
			panic(fmt.Sprintf("cuda: launch %s: argument %d of type %T", kernel, i, x))
		}
	}
	if r := d.run; r != nil && d.collect(r, &rec) {
		return
	}
	d.launchNow(&rec)
}

// launchNow queues rec's kernel on the stream.
func (d *cudaDev) launchNow(rec *launchRec) {
	d.args.val = rec.val
	if r := d.l.call(d.l.launchKernel, rec.fn,
		uintptr(rec.grid[0]), uintptr(rec.grid[1]), uintptr(rec.grid[2]),
		uintptr(rec.block[0]), uintptr(rec.block[1]), uintptr(rec.block[2]),
		uintptr(rec.shared), d.stream, uintptr(unsafe.Pointer(&d.args.ptr[0])), 0); r != 0 {
		d.l.must("cuLaunchKernel "+rec.name, r)
	}
}

const cudaBS = 256

// elems launches kernel over n elements, a thread each.
func (d *cudaDev) elems(kernel string, n int, args ...any) {
	if n == 0 {
		return
	}
	d.launch(kernel, [3]int{(n + cudaBS - 1) / cudaBS}, [3]int{cudaBS}, 0, args...)
}

// rows launches kernel with a block per row.
func (d *cudaDev) rows(kernel string, n, shared int, args ...any) {
	if n == 0 {
		return
	}
	d.launch(kernel, [3]int{n}, [3]int{cudaBS}, shared, args...)
}
