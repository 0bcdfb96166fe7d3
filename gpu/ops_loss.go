package gpu

import (
	"fmt"
	"math"

	"dovetail/internal/topk"
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
		panic(fmt.Sprintf("gpu: TopK: %d of %d values into %d choices for %d rows", k, v, len(top), n))
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

// AdamWUpdate is PyTorch's AdamW: decoupled weight decay, then the
// bias-corrected Adam step.
func (h *host[T]) AdamWUpdate(param, grad, m, v Buffer, p AdamW, decay bool) {
	ps, gs, ms, vs := h.s(param), h.s(grad), h.s(m), h.s(v)
	need("AdamWUpdate", len(ps), gs, ms, vs)
	b1, b2 := float64(p.Beta1), float64(p.Beta2)
	c1 := 1 - math.Pow(b1, float64(p.Step))
	c2 := 1 - math.Pow(b2, float64(p.Step))
	lr, eps, wd, gsc := float64(p.LR), float64(p.Eps), float64(p.WeightDecay), float64(p.GradScale)
	for i, w := range ps {
		g := float64(gs[i]) * gsc
		mi := b1*float64(ms[i]) + (1-b1)*g
		vi := b2*float64(vs[i]) + (1-b2)*g*g
		ms[i], vs[i] = T(mi), T(vi)
		x := float64(w)
		if decay {
			x -= lr * wd * x
		}
		x -= lr * (mi / c1) / (math.Sqrt(vi/c2) + eps)
		ps[i] = T(x)
	}
}
