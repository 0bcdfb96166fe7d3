package cpu

import (
	"dovetail/cpu/kernels"
	"dovetail/quant"
)

// actBuf holds a batch of activation rows in the form each weight type
// multiplies them in, each form computed at most once per batch.
type actBuf struct {
	k       *kernels.Set
	x       []float32
	n, cols int
	buf     [quant.BF16 + 1][]byte // by activation type
	done    [quant.BF16 + 1][]byte // this batch's forms, once computed
}

func newActBuf(k *kernels.Set, values int) actBuf {
	a := actBuf{k: k}
	for _, t := range []quant.Type{quant.F16, quant.BF16, quant.Q8_0, quant.Q4_K} { // one weight type per form
		a.buf[kernels.ActivationType(t)] = make([]byte, kernels.ActivationBytes(t, values))
	}
	return a
}

func (a *actBuf) set(x []float32, n, cols int) {
	a.x, a.n, a.cols = x[:n*cols], n, cols
	a.done = [quant.BF16 + 1][]byte{}
}

// form returns the activations as bytes for weights of type t (in the form
// kernels.ActivationType gives) and the bytes per row.
func (a *actBuf) form(t quant.Type) (act []byte, rowBytes int) {
	f := kernels.ActivationType(t)
	if f == quant.F32 {
		return kernels.Bytes(a.x), 4 * a.cols
	}
	if a.done[f] == nil {
		a.done[f] = a.k.Activations(t, a.buf[f], a.x)
	}
	return a.done[f], kernels.ActivationBytes(t, a.cols)
}
