package device

import (
	"fmt"
	"math"

	"dovetail/quant"
)

// AdamW's two moments are two more copies of every parameter, and on the
// host they sit in the same memory as the target's weights. The host keeps
// them in bfloat16: each update reads them widened and rounds them back to
// nearest even, an error of at most 2⁻⁹ of the value, where a step moves a
// moment by (1−β) of the new value's distance from it (β 0.9 and 0.95 in
// the recipe); bfloat16 keeps float32's range, so no small second moment
// flushes to zero. A small draft trains to the same loss either way
// (TestTrainingBF16Moments). A CUDA device keeps float32 moments (its
// memory is the GPU's).

// hostBF16 is a host buffer of bfloat16 values (AdamW's moments), always
// allocated (the host makes no views of it).
type hostBF16 struct{ d []uint16 }

func (b *hostBF16) Len() int { return len(b.d) }

// AllocMoment is bfloat16 on the float32 host; the float64 host of the
// gradient checks keeps its full precision.
func (h *host[T]) AllocMoment(n int) Buffer {
	var z T
	if _, ok := any(z).(float64); ok {
		return h.Alloc(n)
	}
	h.held.Add(2 * int64(n))
	return &hostBF16{d: make([]uint16, n)}
}

// bf16 is b's values, and whether b is a bfloat16 buffer.
func bf16(b Buffer) ([]uint16, bool) {
	hb, ok := b.(*hostBF16)
	if !ok {
		return nil, false
	}
	return hb.d, true
}

// freeBF16 frees b if it is a bfloat16 buffer, reporting whether it was.
func (h *host[T]) freeBF16(b Buffer) bool {
	hb, ok := b.(*hostBF16)
	if ok && hb.d != nil {
		h.held.Add(-2 * int64(len(hb.d)))
		hb.d = nil
	}
	return ok
}

func uploadBF16(d []uint16, src []float32) {
	if len(src) > len(d) {
		panic(fmt.Sprintf("device: upload of %d values into a buffer of %d", len(src), len(d)))
	}
	for i, v := range src {
		d[i] = quant.F32ToBF16(v)
	}
}

func downloadBF16(dst []float32, s []uint16) {
	if len(dst) > len(s) {
		panic(fmt.Sprintf("device: download of %d values from a buffer of %d", len(dst), len(s)))
	}
	for i := range dst {
		dst[i] = quant.BF16ToF32(s[i])
	}
}

// adamCoef is an AdamW update's constants in float64.
type adamCoef struct {
	b1, b2, c1, c2, lr, eps, wd, gsc float64
	decay                            bool
}

func newAdamCoef(p AdamW, decay bool) adamCoef {
	b1, b2 := float64(p.Beta1), float64(p.Beta2)
	return adamCoef{b1: b1, b2: b2, c1: 1 - math.Pow(b1, float64(p.Step)), c2: 1 - math.Pow(b2, float64(p.Step)),
		lr: float64(p.LR), eps: float64(p.Eps), wd: float64(p.WeightDecay), gsc: float64(p.GradScale), decay: decay}
}

// step is the update of one parameter: PyTorch's AdamW, decoupled weight
// decay, then the bias-corrected Adam step. m and v are the moments before
// the update; it returns the parameter and the moments after it. The
// step uses the moments as computed, before they are stored.
func (a adamCoef) step(w, g, m, v float64) (x, mi, vi float64) {
	g *= a.gsc
	mi = a.b1*m + (1-a.b1)*g
	vi = a.b2*v + (1-a.b2)*g*g
	x = w
	if a.decay {
		x -= a.lr * a.wd * x
	}
	x -= a.lr * (mi / a.c1) / (math.Sqrt(vi/a.c2) + a.eps)
	return x, mi, vi
}
