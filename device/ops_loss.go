package device

import (
	"fmt"
	"math"

	"dovetail/internal/topk"
	"dovetail/quant"
)

func (h *host[T]) SmoothL1(dpred, loss, pred, target Buffer, n, c int, scale float32) {
	dps, ls, ps, ts := h.s(dpred), h.s(loss), h.s(pred), h.s(target)
	need("SmoothL1", n*c, dps, ps, ts)
	need("SmoothL1", n, ls)
	inv := 1 / float64(c)
	for r := range n {
		var l float64
		for i := r * c; i < (r+1)*c; i++ {
			d := float64(ps[i]) - float64(ts[i])
			g := d
			if a := math.Abs(d); a < 1 {
				l += 0.5 * d * d
			} else {
				l += a - 0.5
				g = math.Copysign(1, d)
			}
			if dps != nil {
				dps[i] += T(float64(scale) * g * inv)
			}
		}
		ls[r] = T(l * inv)
	}
}

// softmaxInto writes exp(x − max) into e and returns the index of the
// maximum and log Σ exp(x): one exponential per value, reused by the
// caller for the probabilities.
func softmaxInto[T float32 | float64](e []float64, x []T) (arg int, lse float64) {
	mx := math.Inf(-1)
	for i, v := range x {
		if float64(v) > mx {
			mx, arg = float64(v), i
		}
	}
	var s float64
	for i, v := range x {
		e[i] = exp[T](float64(v) - mx)
		s += e[i]
	}
	return arg, mx + math.Log(s)
}

func (h *host[T]) SoftCrossEntropy(dlogits, loss, agree, logits, target Buffer, n, v int, scale float32) {
	dls, ls, as, lgs, ts := h.s(dlogits), h.s(loss), h.s(agree), h.s(logits), h.s(target)
	need("SoftCrossEntropy", n*v, dls, lgs, ts)
	need("SoftCrossEntropy", n, ls, as)
	h.par(n, 8*v, func(_, lo, hi int) {
		eq, ep := make([]float64, v), make([]float64, v)
		for r := lo; r < hi; r++ {
			lr, tr := lgs[r*v:(r+1)*v], ts[r*v:(r+1)*v]
			aq, lq := softmaxInto(eq, lr)
			ap, lp := softmaxInto(ep, tr)
			// e holds exp(x − max); dividing by Σ = exp(lse − max) gives
			// the probabilities.
			sq, sp := 1/exp[T](lq-float64(lr[aq])), 1/exp[T](lp-float64(tr[ap]))
			var l float64
			for i := range v {
				p := ep[i] * sp
				l -= p * (float64(lr[i]) - lq)
				if dls != nil {
					dls[r*v+i] += T(float64(scale) * (eq[i]*sq - p))
				}
			}
			ls[r] = T(l)
			if as != nil {
				as[r] = 0
				if aq == ap {
					as[r] = 1
				}
			}
		}
	})
}

func (h *host[T]) TopK(top []topk.Choice, logits Buffer, n, v, k int, scale float32) {
	ls := h.s(logits)
	need("TopK", n*v, ls)
	if k > v || len(top) < n*k {
		panic(fmt.Sprintf("device: TopK: %d of %d values into %d choices for %d rows", k, v, len(top), n))
	}
	h.par(n, 8*v, func(_, lo, hi int) {
		var row []float32
		for r := lo; r < hi; r++ {
			lr := ls[r*v : (r+1)*v]
			if f, ok := any(lr).([]float32); ok {
				row = f
			} else {
				row = make([]float32, v)
				for i, x := range lr {
					row[i] = float32(x)
				}
			}
			topk.LogProbs(top[r*k:r*k:r*k+k], row, k, scale)
		}
	})
}

func (h *host[T]) Sum(b Buffer) float64 {
	var s float64
	for _, v := range h.s(b) {
		s += float64(v)
	}
	return s
}

func (h *host[T]) SumSquares(b Buffer) float64 {
	var s float64
	for _, v := range h.s(b) {
		s += float64(v) * float64(v)
	}
	return s
}

// AdamWUpdate is PyTorch's AdamW (adamCoef.step) over every value, with
// the moments in float32 or, from AllocMoment, bfloat16.
func (h *host[T]) AdamWUpdate(param, grad, m, v Buffer, p AdamW, decay bool) {
	ps, gs := h.s(param), h.s(grad)
	a := newAdamCoef(p, decay)
	mb, mok := bf16(m)
	vb, vok := bf16(v)
	if mok || vok {
		if !mok || !vok || len(mb) < len(ps) || len(vb) < len(ps) {
			panic(fmt.Sprintf("device: AdamWUpdate: moments %T and %T for %d values", m, v, len(ps)))
		}
		need("AdamWUpdate", len(ps), gs)
		h.par(len(ps), 16, func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				x, mi, vi := a.step(float64(ps[i]), float64(gs[i]), float64(quant.BF16ToF32(mb[i])), float64(quant.BF16ToF32(vb[i])))
				mb[i], vb[i] = quant.F32ToBF16(float32(mi)), quant.F32ToBF16(float32(vi))
				ps[i] = T(x)
			}
		})
		return
	}
	ms, vs := h.s(m), h.s(v)
	need("AdamWUpdate", len(ps), gs, ms, vs)
	h.par(len(ps), 16, func(_, lo, hi int) {
		for i := lo; i < hi; i++ {
			x, mi, vi := a.step(float64(ps[i]), float64(gs[i]), float64(ms[i]), float64(vs[i]))
			ms[i], vs[i] = T(mi), T(vi)
			ps[i] = T(x)
		}
	})
}
