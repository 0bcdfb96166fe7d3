package device

import (
	"dovetail/models"
	"dovetail/quant"
)

// What model code asks of a device beyond its operations: whether two
// devices share memory, how it keeps frozen matrices, and what it holds.
// Each is an optional method of the implementations, asked through the
// functions below, so that a Device of another package (device/cuda) can
// answer too.

// SameMemory reports whether a and b reach the same memory: the same
// device, or two devices (streams) of one GPU. A matrix uploaded to one
// can then be used by the other.
func SameMemory(a, b Device) bool {
	if a == b {
		return true
	}
	s, ok := a.(interface{ SharesMemory(Device) bool })
	return ok && s.SharesMemory(b)
}

// KeepsFloat32 reports whether d holds a frozen matrix of n values as
// float32 whatever its stored format: the host for small matrices. A Q8_0
// copy of such a matrix would only round its weights. A GPU keeps the
// formats of GPUKeepsBlocks as they are, so a Q8_0 copy is what it drafts
// with.
func KeepsFloat32(d Device, n int) bool {
	k, ok := d.(interface{ KeepsFloat32(n int) bool })
	return ok && k.KeepsFloat32(n)
}

// GPUKeepsBlocks reports whether a GPU keeps a frozen matrix stored as t
// in its blocks, dequantized in registers by its kernels, rather than as
// float32: its VRAM is then the file's bytes. The CUDA device and a
// Counter of a GPU both ask it.
func GPUKeepsBlocks(t quant.Type) bool {
	switch t {
	case quant.Q4_0, quant.Q8_0, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_XS, quant.F16, quant.BF16:
		return true
	}
	return false
}

// CopiesMatrices reports whether d copies a matrix it uploads into memory
// of its own (a GPU, and a Counter of one), so that the tensor's bytes are
// not needed once UploadMatrix returns; the host reads them in place.
func CopiesMatrices(d Device) bool {
	c, ok := d.(interface{ CopiesMatrices() bool })
	return ok && c.CopiesMatrices()
}

// DownloadMatrix copies the bytes of m, as stored (its rows in their
// format), into dst where d copies matrices (CopiesMatrices); it reports
// false where d has no such method.
func DownloadMatrix(d Device, m Matrix, dst []byte) (bool, error) {
	c, ok := d.(interface {
		DownloadMatrix(m Matrix, dst []byte) error
	})
	if !ok {
		return false, nil
	}
	return true, c.DownloadMatrix(m, dst)
}

// UpdateMatrix puts t's values into m, which d made from a tensor of t's
// type and shape, where d keeps matrices in memory of its own (a GPU):
// re-freezing a draft's weights then reuses that memory. It reports false
// where d has no such method (the host reads the tensor's own memory, so
// a new UploadMatrix of it costs nothing).
func UpdateMatrix(d Device, m Matrix, t *models.Tensor) (bool, error) {
	u, ok := d.(interface {
		UpdateMatrix(m Matrix, t *models.Tensor) error
	})
	if !ok {
		return false, nil
	}
	return true, u.UpdateMatrix(m, t)
}

// FreeMatrix gives back m's memory where d keeps matrices in memory of
// its own (a GPU), for matrices of d's own making (a draft's Q8_0 copies),
// not the frozen ones that drafts on d share. Elsewhere it does nothing.
func FreeMatrix(d Device, m Matrix) {
	if f, ok := d.(interface{ FreeMatrix(m Matrix) }); ok && m != nil {
		f.FreeMatrix(m)
	}
}

// AllocKV allocates n values of a KV cache: in 16-bit floats where d keeps
// caches so (a GPU: half the memory of float32, as llama.cpp's F16 cache),
// else a float32 buffer. View, Copy, Free and Attention's k and v take
// it; StoreKV writes float32 rows into it.
func AllocKV(d Device, n int) Buffer {
	if a, ok := d.(interface{ AllocKV(n int) Buffer }); ok {
		return a.AllocKV(n)
	}
	return d.Alloc(n)
}

// StoreKV writes float32 values src into dst, a view of an AllocKV cache
// of src's length, rounding them to the cache's precision.
func StoreKV(d Device, dst, src Buffer) {
	if s, ok := d.(interface{ StoreKV(dst, src Buffer) }); ok {
		s.StoreKV(dst, src)
		return
	}
	d.Copy(dst, src)
}

// Hold counts n bytes (negative: gives them back) that d keeps of its own
// beyond its buffers, where d counts what it holds (the host device and a
// Counter): a draft's Q8_0 copies of its matrices, say.
func Hold(d Device, n int) {
	if h, ok := d.(interface{ hold(n int) }); ok {
		h.hold(n)
	}
}

// Held is the bytes d holds (buffers, matrices it keeps in its own form,
// what Hold counted), where d counts them: the host device and a Counter;
// 0 elsewhere.
func Held(d Device) uint64 {
	if h, ok := d.(interface{ Held() uint64 }); ok {
		return h.Held()
	}
	return 0
}

// Counting reports whether d only counts (a Counter): it holds no values,
// and reading one gives nothing.
func Counting(d Device) bool {
	_, ok := d.(*Counter)
	return ok
}

// AllocMoment allocates n values of an optimizer's moments on dev: in
// dev's compact form if it has one (bfloat16 on the host), else a float32
// buffer. AdamWUpdate, Zero, Upload, Download and Free take it.
func AllocMoment(dev Device, n int) Buffer {
	if a, ok := dev.(interface{ AllocMoment(n int) Buffer }); ok {
		return a.AllocMoment(n)
	}
	return dev.Alloc(n)
}

// MatMulFrozenAdd writes add + x·Wᵀ into out [n×R] (out may be add: a
// residual stream updated in place) in one operation, and reports true,
// where d fuses the two (a GPU, where each launch costs time of its own);
// elsewhere it does nothing and reports false, and the caller multiplies
// and adds.
func MatMulFrozenAdd(d Device, out, x, add Buffer, w Matrix, n int) bool {
	f, ok := d.(interface {
		MatMulFrozenAdd(out, x, add Buffer, w Matrix, n int) bool
	})
	return ok && f.MatMulFrozenAdd(out, x, add, w, n)
}

// MatMulFrozenGLU writes SiLU(x·Gᵀ) ⊙ (x·Uᵀ) into out [n×R] in one
// operation, and reports true, where d fuses the gate's and up's products
// with the SwiGLU between them (a GPU, for matrices of one format and
// rows few enough for its matrix-vector kernels); elsewhere it does
// nothing and reports false.
func MatMulFrozenGLU(d Device, out, x Buffer, gate, up Matrix, n int) bool {
	f, ok := d.(interface {
		MatMulFrozenGLU(out, x Buffer, gate, up Matrix, n int) bool
	})
	return ok && f.MatMulFrozenGLU(out, x, gate, up, n)
}

// RoPEQK rotates a pass's queries q [n × heads·hd] and keys k [n ×
// kvHeads·hd] by positions pos (freqs: Llama 3's factors, or nil) in one
// operation, and reports true, where d fuses the two; elsewhere it does
// nothing and reports false.
func RoPEQK(d Device, q, k Buffer, pos []int, heads, kvHeads, hd int, theta float32, freqs []float32) bool {
	f, ok := d.(interface {
		RoPEQK(q, k Buffer, pos []int, heads, kvHeads, hd int, theta float32, freqs []float32) bool
	})
	return ok && f.RoPEQK(q, k, pos, heads, kvHeads, hd, theta, freqs)
}

// StoreKVPair is StoreKV of a pass's keys and values (k into dk, v into
// dv, of one length) in one operation where d fuses them; elsewhere two.
func StoreKVPair(d Device, dk, k, dv, v Buffer) {
	if s, ok := d.(interface{ StoreKVPair(dk, k, dv, v Buffer) }); ok {
		s.StoreKVPair(dk, k, dv, v)
		return
	}
	StoreKV(d, dk, k)
	StoreKV(d, dv, v)
}

// MatMulFrozen3 writes x·Wᵢᵀ into outs[i] [n×Rᵢ] for three matrices that
// read the same x (a layer's Q, K and V) in one operation, and reports
// true, where d fuses them (a GPU, for matrices of 8-bit formats and rows
// few enough for its matrix-vector kernels); elsewhere it does nothing
// and reports false.
func MatMulFrozen3(d Device, outs [3]Buffer, x Buffer, ws [3]Matrix, n int) bool {
	f, ok := d.(interface {
		MatMulFrozen3(outs [3]Buffer, x Buffer, ws [3]Matrix, n int) bool
	})
	return ok && f.MatMulFrozen3(outs, x, ws, n)
}

// Graphed runs fn, a sequence of operations on d that the caller repeats
// with the same shapes (key names them: a sequence's decode step of n
// rows, say), where d may replay them as one unit: a GPU records fn's
// kernel launches once and then launches them as a CUDA graph, one driver
// call for the lot. fn's results are the same either way; elsewhere d
// just runs fn.
func Graphed(d Device, key any, fn func()) {
	if g, ok := d.(interface{ Graphed(key any, fn func()) }); ok {
		g.Graphed(key, fn)
		return
	}
	fn()
}
