package device

import "math"

// Row-wise and elementwise operations. Statistics (sums of squares, dot
// products along a row) are accumulated in float64 so that float32 and
// float64 devices differ only by the rounding of the stored values.

func (h *host[T]) RMSNorm(out, x, w Buffer, n, c int, eps float32) {
	os, xs, ws := h.s(out), h.s(x), h.s(w)
	need("RMSNorm", n*c, os, xs)
	need("RMSNorm", c, ws)
	h.par(n, 4*c, func(_, lo, hi int) {
		for r := lo; r < hi; r++ {
			xr, or := xs[r*c:(r+1)*c], os[r*c:(r+1)*c]
			rstd := rmsScale(xr, eps)
			for i, v := range xr {
				or[i] = T(float64(v)*rstd) * ws[i]
			}
		}
	})
}

// rmsScale is 1/sqrt(mean(x²) + eps).
func rmsScale[T float32 | float64](x []T, eps float32) float64 {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	return 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
}

// RMSNormBackward recomputes the scale rather than storing it: one pass
// over a row costs less than keeping per-row statistics alive.
//
// With x̂ = x·rstd and g = dout⊙w: dx = rstd·(g − x̂·mean(g⊙x̂)),
// dw = Σ_rows dout⊙x̂.
func (h *host[T]) RMSNormBackward(dx, dw, dout, x, w Buffer, n, c int, eps float32) {
	dxs, dws, ds, xs, ws := h.s(dx), h.s(dw), h.s(dout), h.s(x), h.s(w)
	need("RMSNormBackward", n*c, dxs, ds, xs)
	need("RMSNormBackward", c, dws, ws)
	parts := make([][]T, h.workers)
	h.par(n, 6*c, func(wk, lo, hi int) {
		var acc []T
		if dws != nil {
			acc = make([]T, c)
		}
		for r := lo; r < hi; r++ {
			xr, dr := xs[r*c:(r+1)*c], ds[r*c:(r+1)*c]
			rstd := rmsScale(xr, eps)
			var dot float64
			for i, v := range xr {
				dot += float64(dr[i]) * float64(ws[i]) * float64(v) * rstd
			}
			dot /= float64(c)
			for i, v := range xr {
				xh := float64(v) * rstd
				if dxs != nil {
					dxs[r*c+i] += T(rstd * (float64(dr[i])*float64(ws[i]) - xh*dot))
				}
				if acc != nil {
					acc[i] += T(float64(dr[i]) * xh)
				}
			}
		}
		parts[wk] = acc
	})
	for _, p := range parts {
		if p != nil {
			addTo(dws[:c], p)
		}
	}
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

func (h *host[T]) SiLU(out, x Buffer) {
	os, xs := h.s(out), h.s(x)
	need("SiLU", len(xs), os)
	for i, v := range xs {
		os[i] = T(float64(v) * sigmoid(float64(v)))
	}
}

func (h *host[T]) SiLUBackward(dx, dout, x Buffer) {
	dxs, ds, xs := h.s(dx), h.s(dout), h.s(x)
	need("SiLUBackward", len(xs), dxs, ds)
	for i, v := range xs {
		s := sigmoid(float64(v))
		dxs[i] += T(float64(ds[i]) * s * (1 + float64(v)*(1-s)))
	}
}

func (h *host[T]) SwiGLU(out, gate, up Buffer) {
	os, gs, us := h.s(out), h.s(gate), h.s(up)
	need("SwiGLU", len(gs), os, us)
	for i, g := range gs {
		os[i] = T(float64(g) * sigmoid(float64(g)) * float64(us[i]))
	}
}

func (h *host[T]) SwiGLUBackward(dgate, dup, dout, gate, up Buffer) {
	dgs, dus, ds, gs, us := h.s(dgate), h.s(dup), h.s(dout), h.s(gate), h.s(up)
	need("SwiGLUBackward", len(gs), dgs, dus, ds, us)
	for i, g := range gs {
		gf := float64(g)
		s := sigmoid(gf)
		d := float64(ds[i])
		dgs[i] += T(d * float64(us[i]) * s * (1 + gf*(1-s)))
		dus[i] += T(d * gf * s)
	}
}

func (h *host[T]) Add(out, a, b Buffer) {
	os, as, bs := h.s(out), h.s(a), h.s(b)
	need("Add", len(as), os, bs)
	for i, v := range as {
		os[i] = v + bs[i]
	}
}

func (h *host[T]) Concat(out, a, b Buffer, n, ca, cb int) {
	os, as, bs := h.s(out), h.s(a), h.s(b)
	need("Concat", n*(ca+cb), os)
	need("Concat", n*ca, as)
	need("Concat", n*cb, bs)
	c := ca + cb
	for r := range n {
		copy(os[r*c:r*c+ca], as[r*ca:(r+1)*ca])
		copy(os[r*c+ca:(r+1)*c], bs[r*cb:(r+1)*cb])
	}
}

func (h *host[T]) ConcatBackward(da, db, dout Buffer, n, ca, cb int) {
	das, dbs, ds := h.s(da), h.s(db), h.s(dout)
	need("ConcatBackward", n*(ca+cb), ds)
	need("ConcatBackward", n*ca, das)
	need("ConcatBackward", n*cb, dbs)
	c := ca + cb
	for r := range n {
		if das != nil {
			addTo(das[r*ca:(r+1)*ca], ds[r*c:r*c+ca])
		}
		if dbs != nil {
			addTo(dbs[r*cb:(r+1)*cb], ds[r*c+ca:(r+1)*c])
		}
	}
}

func (h *host[T]) Gate(out, zpre, h1, h2 Buffer) {
	os, zs, as, bs := h.s(out), h.s(zpre), h.s(h1), h.s(h2)
	need("Gate", len(zs), os, as, bs)
	for i, zp := range zs {
		z := sigmoid(float64(zp))
		os[i] = T(z*float64(as[i]) + (1-z)*float64(bs[i]))
	}
}

// GateBackward: with z = σ(zpre), ∂out/∂z = h1 − h2 and σ' = z(1−z).
func (h *host[T]) GateBackward(dzpre, dh1, dh2, dout, zpre, h1, h2 Buffer) {
	dzs, das, dbs, ds, zs, as, bs := h.s(dzpre), h.s(dh1), h.s(dh2), h.s(dout), h.s(zpre), h.s(h1), h.s(h2)
	need("GateBackward", len(zs), dzs, das, dbs, ds, as, bs)
	for i, zp := range zs {
		z := sigmoid(float64(zp))
		d := float64(ds[i])
		dzs[i] += T(d * (float64(as[i]) - float64(bs[i])) * z * (1 - z))
		das[i] += T(d * z)
		dbs[i] += T(d * (1 - z))
	}
}
