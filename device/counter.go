package device

import (
	"unsafe"

	"dovetail/internal/topk"
	"dovetail/models"
	"dovetail/quant"
)

// Counter is a Device that computes nothing and counts the bytes a real
// device would hold: float32 buffers, and frozen matrices as a CUDA
// device (in their blocks, see GPUKeepsBlocks; other formats as float32)
// or the host (small ones dequantized) keeps them.
// Running a model's set-up code on one measures it before anything is
// allocated (the memory budget).
type Counter struct {
	gpu   bool
	small int // a host's HostConfig.Float32Upto
	held  uint64
}

// NewCounter counts as a GPU does (onGPU) or as NewHost's device does.
func NewCounter(onGPU bool) *Counter {
	return &Counter{gpu: onGPU, small: HostConfig{}.small()}
}

// NewHostCounter counts as NewHostWith(c) holds.
func NewHostCounter(c HostConfig) *Counter { return &Counter{small: c.small()} }

// Held is the bytes counted so far, less those freed.
func (s *Counter) Held() uint64 { return s.held }

// hold counts what the host keeps of its own (a draft's Q8_0 copies); a
// GPU's copies are the matrices UploadMatrix counted.
func (s *Counter) hold(n int) {
	if !s.gpu {
		s.held += uint64(n)
	}
}

// CopiesMatrices: a GPU's do (device.CopiesMatrices).
func (s *Counter) CopiesMatrices() bool { return s.gpu }

// KeepsFloat32: small matrices on the host; none on a GPU.
func (s *Counter) KeepsFloat32(n int) bool { return !s.gpu && n <= s.small }

// SharesMemory: two counters of a GPU count two streams of one GPU.
func (s *Counter) SharesMemory(d Device) bool {
	o, ok := d.(*Counter)
	return ok && s.gpu && o.gpu
}

type counterBuf struct {
	n          int
	size       uint64 // bytes a value
	view, gone bool
}

func (b *counterBuf) Len() int { return b.n }

type counterMat struct{ rows, cols int }

func (m *counterMat) Rows() int { return m.rows }
func (m *counterMat) Cols() int { return m.cols }

func (s *Counter) Name() string {
	if s.gpu {
		return "GPU (counting)"
	}
	return "host (counting)"
}
func (s *Counter) MemInfo() (free, total uint64) { return 0, 0 }
func (s *Counter) Close()                        {}
func (s *Counter) Alloc(n int) Buffer {
	s.held += 4 * uint64(n)
	return &counterBuf{n: n, size: 4}
}

// AllocKV counts a KV cache as the device keeps it: halves on a GPU,
// float32 on the host.
func (s *Counter) AllocKV(n int) Buffer {
	size := uint64(4)
	if s.gpu {
		size = 2
	}
	s.held += size * uint64(n)
	return &counterBuf{n: n, size: size}
}

// AllocMoment counts AdamW's moments as the device keeps them: bfloat16 on
// the host, float32 on a GPU.
func (s *Counter) AllocMoment(n int) Buffer {
	size := uint64(4)
	if !s.gpu {
		size = 2
	}
	s.held += size * uint64(n)
	return &counterBuf{n: n, size: size}
}

func (s *Counter) Free(b Buffer) {
	if sb, ok := b.(*counterBuf); ok && !sb.view && !sb.gone {
		s.held -= sb.size * uint64(sb.n)
		sb.gone = true
	}
}
func (s *Counter) View(b Buffer, off, n int) Buffer { return &counterBuf{n: n, view: true} }
func (s *Counter) UploadMatrix(t *models.Tensor) (Matrix, error) {
	n := uint64(t.Rows) * uint64(t.Cols)
	switch {
	case s.gpu && GPUKeepsBlocks(t.Type):
		s.held += uint64(t.Rows) * uint64(t.RowBytes)
	case s.gpu:
		s.held += 4 * n
	case t.Type == quant.F32 && uintptr(unsafe.Pointer(unsafe.SliceData(t.Data)))%4 == 0:
	case n <= uint64(s.small):
		s.held += 4 * n
	}
	return &counterMat{t.Rows, t.Cols}, nil
}

// The operations do nothing.
func (s *Counter) Upload(Buffer, []float32)                                      {}
func (s *Counter) Download([]float32, Buffer)                                    {}
func (s *Counter) Zero(Buffer)                                                   {}
func (s *Counter) Copy(Buffer, Buffer)                                           {}
func (s *Counter) Embed(Buffer, Matrix, []int)                                   {}
func (s *Counter) MatMul(_, _, _ Buffer, _, _, _ int)                            {}
func (s *Counter) MatMulBackward(_, _, _, _, _ Buffer, _, _, _ int)              {}
func (s *Counter) MatMulFrozen(_, _ Buffer, _ Matrix, _ int)                     {}
func (s *Counter) MatMulFrozenBackward(_, _ Buffer, _ Matrix, _ int)             {}
func (s *Counter) RMSNorm(_, _, _ Buffer, _, _ int, _ float32)                   {}
func (s *Counter) RMSNormBackward(_, _, _, _, _ Buffer, _, _ int, _ float32)     {}
func (s *Counter) SiLU(_, _ Buffer)                                              {}
func (s *Counter) SiLUBackward(_, _, _ Buffer)                                   {}
func (s *Counter) SwiGLU(_, _, _ Buffer)                                         {}
func (s *Counter) SwiGLUBackward(_, _, _, _, _ Buffer)                           {}
func (s *Counter) Add(_, _, _ Buffer)                                            {}
func (s *Counter) Concat(_, _, _ Buffer, _, _, _ int)                            {}
func (s *Counter) ConcatBackward(_, _, _ Buffer, _, _, _ int)                    {}
func (s *Counter) Gate(_, _, _, _ Buffer)                                        {}
func (s *Counter) GateBackward(_, _, _, _, _, _, _ Buffer)                       {}
func (s *Counter) RoPE(Buffer, []int, int, int, float32)                         {}
func (s *Counter) RoPEBackward(Buffer, []int, int, int, float32)                 {}
func (s *Counter) RoPEFreqs(Buffer, []int, int, int, float32, []float32)         {}
func (s *Counter) RoPEFreqsBackward(Buffer, []int, int, int, float32, []float32) {}
func (s *Counter) Attention(_, _, _, _, _ Buffer, _ Attn)                        {}
func (s *Counter) AttentionBackward(_, _, _, _, _, _, _, _ Buffer, _ Attn)       {}
func (s *Counter) SmoothL1(_, _, _, _ Buffer, _, _ int, _ float32)               {}
func (s *Counter) SoftCrossEntropy(_, _, _, _, _ Buffer, _, _ int, _ float32)    {}
func (s *Counter) TopK([]topk.Choice, Buffer, int, int, int, float32)            {}
func (s *Counter) Sum(Buffer) float64                                            { return 0 }
func (s *Counter) SumSquares(Buffer) float64                                     { return 0 }
func (s *Counter) AdamWUpdate(_, _, _, _ Buffer, _ AdamW, _ bool)                {}
