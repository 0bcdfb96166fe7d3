package device

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"dovetail/cpu/kernels"
	"dovetail/internal/sysmem"
	"dovetail/models"
	"dovetail/quant"
)

// host is the Device that runs on the CPU. Its values are T: float32 for
// real use, float64 for the gradient checks, whose finite differences need
// the precision. Matrix products of float32 go to the cpu/kernels matmul
// (SIMD C when built); everything else is plain Go.
type host[T float32 | float64] struct {
	workers int
	small   int // HostConfig.Float32Upto
	k       *kernels.Set
	pool    sync.Pool    // *[]T scratch
	held    atomic.Int64 // bytes of live buffers and dequantized matrices
}

// HostConfig says how a host device runs.
type HostConfig struct {
	// Threads is the most goroutines an operation uses (≤ 0: one per CPU).
	Threads int
	// Float32Upto is the most values of a frozen matrix the device keeps
	// dequantized to float32 (0: DefaultFloat32Upto); larger ones stay in
	// their stored format, dequantized a chunk at a time per product.
	// Tests of small drafts lower it to make their matrices large ones.
	Float32Upto int
}

// DefaultFloat32Upto is HostConfig's default: the LM heads of the test
// models are below it, a 7B target's embeddings far above.
const DefaultFloat32Upto = 1 << 22

func (c HostConfig) small() int {
	if c.Float32Upto > 0 {
		return c.Float32Upto
	}
	return DefaultFloat32Upto
}

// NewHost returns the host device, using up to threads goroutines per
// operation (≤ 0: one per CPU).
func NewHost(threads int) Device { return NewHostWith(HostConfig{Threads: threads}) }

// NewHostWith returns the host device c describes.
func NewHostWith(c HostConfig) Device { return newHost[float32](c) }

// NewHost64 returns a host device of float64 values: the gradient checks,
// whose finite differences need the precision. Values64 reads its buffers.
func NewHost64(c HostConfig) Device { return newHost[float64](c) }

// Values64 is the values of a buffer of a NewHost64 device, shared (the
// gradient checks perturb them in place).
func Values64(b Buffer) []float64 { return b.(*hostBuf[float64]).d }

// OnHost reports whether d is a host device: computing on the CPU.
func OnHost(d Device) bool {
	switch d.(type) {
	case *host[float32], *host[float64]:
		return true
	}
	return false
}

func newHost[T float32 | float64](c HostConfig) *host[T] {
	threads := c.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	k, err := kernels.Best()
	if err != nil {
		k, _ = kernels.ByName("go")
	}
	return &host[T]{workers: threads, small: c.small(), k: k}
}

// KeepsFloat32 is true for matrices of at most HostConfig.Float32Upto
// values (see device.KeepsFloat32).
func (h *host[T]) KeepsFloat32(n int) bool { return n <= h.small }

func (h *host[T]) hold(n int) { h.held.Add(int64(n)) }

func (h *host[T]) Name() string {
	var z T
	if _, ok := any(z).(float64); ok {
		return "host (float64)"
	}
	return fmt.Sprintf("host (%d threads, %s kernels)", h.workers, h.k.Name)
}

type hostBuf[T float32 | float64] struct {
	d   []T
	own bool // allocated, not a view
}

func (b *hostBuf[T]) Len() int { return len(b.d) }

// s is b's values; a buffer of another device is a bug in the caller.
func (h *host[T]) s(b Buffer) []T {
	if b == nil {
		return nil
	}
	hb, ok := b.(*hostBuf[T])
	if !ok {
		panic(fmt.Sprintf("device: %T is not a buffer of this host device", b))
	}
	return hb.d
}

func (h *host[T]) Alloc(n int) Buffer {
	h.held.Add(int64(n) * int64(unsafe.Sizeof(T(0))))
	return &hostBuf[T]{d: make([]T, n), own: true}
}

func (h *host[T]) Free(b Buffer) {
	if h.freeBF16(b) {
		return
	}
	if hb, ok := b.(*hostBuf[T]); ok && hb.own && hb.d != nil {
		h.held.Add(-int64(len(hb.d)) * int64(unsafe.Sizeof(T(0))))
		hb.d = nil
	}
}

// MemInfo is the memory the machine has available, and all of it.
func (h *host[T]) MemInfo() (free, total uint64) {
	info, err := sysmem.Read()
	if err != nil {
		return 0, 0
	}
	return info.Available, info.Total
}

// Close does nothing: the host device holds nothing of its own.
func (h *host[T]) Close() {}

// Held is the bytes of the buffers allocated and not freed, and of the
// matrices dequantized to floats: what the device holds.
func (h *host[T]) Held() uint64 { return uint64(max(0, h.held.Load())) }

func (h *host[T]) View(b Buffer, off, n int) Buffer {
	d := h.s(b)
	if off < 0 || n < 0 || off+n > len(d) {
		panic(fmt.Sprintf("device: view [%d, %d) of a buffer of %d values", off, off+n, len(d)))
	}
	return &hostBuf[T]{d: d[off : off+n : off+n]}
}

func (h *host[T]) Upload(dst Buffer, src []float32) {
	if b, ok := bf16(dst); ok {
		uploadBF16(b, src)
		return
	}
	d := h.s(dst)
	if len(src) > len(d) {
		panic(fmt.Sprintf("device: upload of %d values into a buffer of %d", len(src), len(d)))
	}
	for i, v := range src {
		d[i] = T(v)
	}
}

func (h *host[T]) Download(dst []float32, src Buffer) {
	if b, ok := bf16(src); ok {
		downloadBF16(dst, b)
		return
	}
	s := h.s(src)
	if len(dst) > len(s) {
		panic(fmt.Sprintf("device: download of %d values from a buffer of %d", len(dst), len(s)))
	}
	for i := range dst {
		dst[i] = float32(s[i])
	}
}

func (h *host[T]) Zero(b Buffer) {
	if d, ok := bf16(b); ok {
		clear(d)
		return
	}
	clear(h.s(b))
}

func (h *host[T]) Copy(dst, src Buffer) {
	d, s := h.s(dst), h.s(src)
	if len(d) != len(s) {
		panic(fmt.Sprintf("device: copy of %d values into %d", len(s), len(d)))
	}
	copy(d, s)
}

// scratch returns n values of temporary memory; give it back with put.
func (h *host[T]) scratch(n int) []T {
	if p, ok := h.pool.Get().(*[]T); ok && cap(*p) >= n {
		return (*p)[:n]
	}
	return make([]T, n)
}

func (h *host[T]) put(s []T) { h.pool.Put(&s) }

// par runs fn over [0, n) in contiguous chunks on up to h.workers
// goroutines, or inline when the work (n × cost per item) is too small to
// be worth a goroutine. chunk numbers the pieces for per-chunk scratch.
func (h *host[T]) par(n, cost int, fn func(chunk, lo, hi int)) {
	chunks := min(h.workers, n, max(1, n*cost/(1<<15)))
	if chunks <= 1 {
		if n > 0 {
			fn(0, 0, n)
		}
		return
	}
	var wg sync.WaitGroup
	wg.Add(chunks - 1)
	for c := 1; c < chunks; c++ {
		go func() {
			defer wg.Done()
			fn(c, c*n/chunks, (c+1)*n/chunks)
		}()
	}
	fn(0, 0, n/chunks)
	wg.Wait()
}

// hostMat is a frozen matrix: the tensor's bytes (memory-mapped from the
// model file, not copied) and, when that is cheap, its values as float32:
// the same bytes for an aligned F32 tensor, or a dequantized copy of a
// small one (HostConfig.Float32Upto).
// Large quantized matrices are dequantized a chunk at a time per product,
// never whole: 32k × 4096 floats would be half a gigabyte.
type hostMat struct {
	t                    quant.Type
	rows, cols, rowBytes int
	data                 []byte
	f32                  []float32
	f32T                 []float32 // f32 transposed, made by the first backward pass
	once                 sync.Once
}

func (m *hostMat) Rows() int { return m.rows }
func (m *hostMat) Cols() int { return m.cols }

func (h *host[T]) UploadMatrix(t *models.Tensor) (Matrix, error) {
	if !quant.CanDequantize(t.Type) {
		return nil, fmt.Errorf("tensor %s: type %v cannot be dequantized", t.Name, t.Type)
	}
	if rb, err := t.Type.RowSize(t.Cols); err != nil || rb != t.RowBytes || len(t.Data) < t.Rows*t.RowBytes {
		return nil, fmt.Errorf("tensor %s: %d bytes for %d rows of %d %v values", t.Name, len(t.Data), t.Rows, t.Cols, t.Type)
	}
	m := &hostMat{t: t.Type, rows: t.Rows, cols: t.Cols, rowBytes: t.RowBytes, data: t.Data}
	n := t.Rows * t.Cols
	switch {
	case t.Type == quant.F32 && uintptr(unsafe.Pointer(unsafe.SliceData(t.Data)))%4 == 0:
		m.f32 = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(t.Data))), n)
	case n <= h.small:
		m.f32 = make([]float32, n)
		h.held.Add(4 * int64(n))
		for r := range t.Rows {
			if err := quant.DequantizeRow(t.Type, m.f32[r*t.Cols:(r+1)*t.Cols], t.Row(r)); err != nil {
				return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
			}
		}
	}
	return m, nil
}

func (h *host[T]) mat(m Matrix) *hostMat {
	hm, ok := m.(*hostMat)
	if !ok {
		panic(fmt.Sprintf("device: %T is not a matrix of this host device", m))
	}
	return hm
}

// dequant writes rows [lo, hi) of m into dst as T.
func (h *host[T]) dequant(dst []T, m *hostMat, lo, hi int, tmp []float32) {
	for r := lo; r < hi; r++ {
		row := dst[(r-lo)*m.cols : (r-lo+1)*m.cols]
		if m.f32 != nil {
			for i, v := range m.f32[r*m.cols : (r+1)*m.cols] {
				row[i] = T(v)
			}
			continue
		}
		if f, ok := any(row).([]float32); ok {
			quant.DequantizeRow(m.t, f, m.data[r*m.rowBytes:(r+1)*m.rowBytes])
			continue
		}
		quant.DequantizeRow(m.t, tmp, m.data[r*m.rowBytes:(r+1)*m.rowBytes])
		for i, v := range tmp {
			row[i] = T(v)
		}
	}
}

func need[T float32 | float64](op string, want int, bufs ...[]T) {
	for i, b := range bufs {
		if b != nil && len(b) < want {
			panic(fmt.Sprintf("device: %s: argument %d holds %d values, need %d", op, i, len(b), want))
		}
	}
}
