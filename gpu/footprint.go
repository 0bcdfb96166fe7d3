package gpu

import (
	"unsafe"

	"dovetail/internal/topk"
	"dovetail/models"
	"dovetail/models/draft"
	"dovetail/quant"
)

// Footprint is the memory, in bytes, a draft takes on its devices: what a
// memory budget counts before anything is allocated.
type Footprint struct {
	// Draft is the drafting device's share: the live draft's weights
	// (with a spare version for the next publication when it adapts), the
	// frozen matrices it holds in its own form, and every sequence's cache
	// and scratch.
	Draft uint64
	// Trainer is the training device's share: the shadow, the kept
	// version, gradients, AdamW moments, and activations of a batch.
	Trainer uint64
}

// Learn is the shape of the trainer Measure counts (nil: none).
type Learn struct {
	Config          TrainConfig
	MaxRows, MaxLen int
	EvalDepth       int
}

// Measure counts what a draft of shape c for target m takes: drafting on a
// GPU (else on the host) with sequences sequences of ctx positions, and
// learning as l says (nil: no trainer) on a GPU or the host. It runs the
// same set-up code as the real devices on ones that only count.
func Measure(c draft.Config, m *models.Llama, onGPU bool, ctx, sequences int, l *Learn, trainOnGPU bool) (_ Footprint, err error) {
	defer catchDevice(&err)
	dd, td := &sizer{gpu: onGPU}, &sizer{gpu: trainOnGPU}
	d, err := NewDraft(dd, c, m)
	if err != nil {
		return Footprint{}, err
	}
	if err := d.FreezeForDrafting(); err != nil {
		return Footprint{}, err
	}
	live := NewLive(d, 0)
	// As the runner does: the live versions keep only what drafting reads.
	live.DropFloat()
	var lr *Learner
	if l != nil {
		lr = NewLearner(live, td, l.Config, l.MaxRows, l.MaxLen, l.EvalDepth)
	}
	for range sequences {
		live.NewSequence(ctx)
	}
	if lr != nil {
		// Publishing leaves a spare version beside the newest.
		if _, err := lr.Publish(true); err != nil {
			return Footprint{}, err
		}
	}
	return Footprint{Draft: dd.held, Trainer: td.held}, nil
}

// sizer is a Device that computes nothing and counts the bytes a real
// device would hold: float32 buffers, and frozen matrices as a CUDA
// device (float32) or the host (small ones dequantized) keeps them.
type sizer struct {
	gpu  bool
	held uint64
}

type sizerBuf struct {
	n          int
	size       uint64 // bytes a value
	view, gone bool
}

func (b *sizerBuf) Len() int { return b.n }

type sizerMat struct{ rows, cols int }

func (m *sizerMat) Rows() int { return m.rows }
func (m *sizerMat) Cols() int { return m.cols }

func (s *sizer) Name() string {
	if s.gpu {
		return "GPU (counting)"
	}
	return "host (counting)"
}
func (s *sizer) MemInfo() (free, total uint64) { return 0, 0 }
func (s *sizer) Close()                        {}
func (s *sizer) Alloc(n int) Buffer {
	s.held += 4 * uint64(n)
	return &sizerBuf{n: n, size: 4}
}

// AllocMoment counts AdamW's moments as the device keeps them: bfloat16 on
// the host, float32 on a GPU.
func (s *sizer) AllocMoment(n int) Buffer {
	size := uint64(4)
	if !s.gpu {
		size = 2
	}
	s.held += size * uint64(n)
	return &sizerBuf{n: n, size: size}
}

func (s *sizer) Free(b Buffer) {
	if sb, ok := b.(*sizerBuf); ok && !sb.view && !sb.gone {
		s.held -= sb.size * uint64(sb.n)
		sb.gone = true
	}
}
func (s *sizer) View(b Buffer, off, n int) Buffer { return &sizerBuf{n: n, view: true} }
func (s *sizer) UploadMatrix(t *models.Tensor) (Matrix, error) {
	n := uint64(t.Rows) * uint64(t.Cols)
	switch {
	case s.gpu:
		s.held += 4 * n
	case t.Type == quant.F32 && uintptr(unsafe.Pointer(unsafe.SliceData(t.Data)))%4 == 0:
	case n <= uint64(smallMatrix):
		s.held += 4 * n
	}
	return &sizerMat{t.Rows, t.Cols}, nil
}

// The operations do nothing.
func (s *sizer) Upload(Buffer, []float32)                                   {}
func (s *sizer) Download([]float32, Buffer)                                 {}
func (s *sizer) Zero(Buffer)                                                {}
func (s *sizer) Copy(Buffer, Buffer)                                        {}
func (s *sizer) Embed(Buffer, Matrix, []int)                                {}
func (s *sizer) MatMul(_, _, _ Buffer, _, _, _ int)                         {}
func (s *sizer) MatMulBackward(_, _, _, _, _ Buffer, _, _, _ int)           {}
func (s *sizer) MatMulFrozen(_, _ Buffer, _ Matrix, _ int)                  {}
func (s *sizer) MatMulFrozenBackward(_, _ Buffer, _ Matrix, _ int)          {}
func (s *sizer) RMSNorm(_, _, _ Buffer, _, _ int, _ float32)                {}
func (s *sizer) RMSNormBackward(_, _, _, _, _ Buffer, _, _ int, _ float32)  {}
func (s *sizer) SiLU(_, _ Buffer)                                           {}
func (s *sizer) SiLUBackward(_, _, _ Buffer)                                {}
func (s *sizer) SwiGLU(_, _, _ Buffer)                                      {}
func (s *sizer) SwiGLUBackward(_, _, _, _, _ Buffer)                        {}
func (s *sizer) Add(_, _, _ Buffer)                                         {}
func (s *sizer) Concat(_, _, _ Buffer, _, _, _ int)                         {}
func (s *sizer) ConcatBackward(_, _, _ Buffer, _, _, _ int)                 {}
func (s *sizer) Gate(_, _, _, _ Buffer)                                     {}
func (s *sizer) GateBackward(_, _, _, _, _, _, _ Buffer)                    {}
func (s *sizer) RoPE(Buffer, []int, int, int, float32)                      {}
func (s *sizer) RoPEBackward(Buffer, []int, int, int, float32)              {}
func (s *sizer) Attention(_, _, _, _, _ Buffer, _ Attn)                     {}
func (s *sizer) AttentionBackward(_, _, _, _, _, _, _, _ Buffer, _ Attn)    {}
func (s *sizer) SmoothL1(_, _, _, _ Buffer, _, _ int, _ float32)            {}
func (s *sizer) SoftCrossEntropy(_, _, _, _, _ Buffer, _, _ int, _ float32) {}
func (s *sizer) TopK([]topk.Choice, Buffer, int, int, int, float32)         {}
func (s *sizer) Sum(Buffer) float64                                         { return 0 }
func (s *sizer) SumSquares(Buffer) float64                                  { return 0 }
func (s *sizer) AdamWUpdate(_, _, _, _ Buffer, _ AdamW, _ bool)             {}
