package gpu

import (
	"fmt"
	"math"
)

// ropeAngle is the rotation of pair i of a head of hd dimensions at pos.
func ropeAngle(pos, i, hd int, theta float32) float64 {
	return float64(pos) * math.Pow(float64(theta), -2*float64(i)/float64(hd))
}

// rope rotates every pair by sign·angle (sign −1: the inverse, which is
// also the transpose, hence the backward pass).
func (h *host[T]) rope(op string, x Buffer, pos []int, heads, hd int, theta float32, sign float64) {
	xs := h.s(x)
	need(op, len(pos)*heads*hd, xs)
	if hd%2 != 0 {
		panic(fmt.Sprintf("gpu: %s: odd head dimension %d", op, hd))
	}
	h.par(len(pos), heads*hd*4, func(_, lo, hi int) {
		cs := make([]float64, hd)
		for r := lo; r < hi; r++ {
			for i := 0; i < hd/2; i++ {
				s, c := math.Sincos(sign * ropeAngle(pos[r], i, hd, theta))
				cs[2*i], cs[2*i+1] = c, s
			}
			row := xs[r*heads*hd : (r+1)*heads*hd]
			for hh := range heads {
				v := row[hh*hd : (hh+1)*hd]
				for i := 0; i < hd; i += 2 {
					c, s := cs[i], cs[i+1]
					x0, x1 := float64(v[i]), float64(v[i+1])
					v[i] = T(x0*c - x1*s)
					v[i+1] = T(x0*s + x1*c)
				}
			}
		}
	})
}

func (h *host[T]) RoPE(x Buffer, pos []int, heads, hd int, theta float32) {
	h.rope("RoPE", x, pos, heads, hd, theta, 1)
}

func (h *host[T]) RoPEBackward(dx Buffer, pos []int, heads, hd int, theta float32) {
	h.rope("RoPEBackward", dx, pos, heads, hd, theta, -1)
}

func checkAttn(op string, a Attn) {
	if a.Heads < 1 || a.KVHeads < 1 || a.Heads%a.KVHeads != 0 || a.HeadDim < 1 ||
		a.Past < 0 || a.Rows < 1 || a.Pend < a.Rows || (a.Mask != nil && len(a.Mask) < a.Rows*a.Pend) {
		panic(fmt.Sprintf("gpu: %s: bad shape %+v", op, a))
	}
}

// visible reports whether query row j sees key t.
func (a Attn) visible(j, t int) bool {
	if t < a.Past {
		return true
	}
	i := t - a.Past
	if a.Mask == nil {
		return i <= a.Pend-a.Rows+j
	}
	return a.Mask[j*a.Pend+i] != 0
}

// keyLimit is one past the last key row j may see.
func (a Attn) keyLimit(j int) int {
	if a.Mask == nil {
		return a.Past + a.Pend - a.Rows + j + 1
	}
	return a.Keys()
}

func (h *host[T]) Attention(out, probs, q, k, v Buffer, a Attn) {
	checkAttn("Attention", a)
	hd, keys := a.HeadDim, a.Keys()
	qd, kvd := a.Heads*hd, a.KVHeads*hd
	os, ps, qs, ks, vs := h.s(out), h.s(probs), h.s(q), h.s(k), h.s(v)
	need("Attention", a.Rows*qd, os, qs)
	need("Attention", a.Rows*a.Heads*keys, ps)
	need("Attention", keys*kvd, ks, vs)
	scale := 1 / math.Sqrt(float64(hd))
	group := a.Heads / a.KVHeads
	h.par(a.Rows*a.Heads, keys*hd*2, func(_, lo, hi int) {
		acc := make([]float64, hd)
		sc := make([]float64, keys)
		vis := make([]int, 0, keys)
		lastJ := -1
		for jh := lo; jh < hi; jh++ {
			j, hh := jh/a.Heads, jh%a.Heads
			if j != lastJ {
				// The keys row j sees, shared by its heads.
				vis, lastJ = vis[:0], j
				for t := range a.keyLimit(j) {
					if a.visible(j, t) {
						vis = append(vis, t)
					}
				}
			}
			g := hh / group
			qj := qs[j*qd+hh*hd : j*qd+(hh+1)*hd]
			mx := math.Inf(-1)
			for i, t := range vis {
				kt := ks[t*kvd+g*hd : t*kvd+(g+1)*hd]
				var s T
				for d, qv := range qj {
					s += qv * kt[d]
				}
				sc[i] = float64(s) * scale
				mx = max(mx, sc[i])
			}
			var sum float64
			for i := range vis {
				sc[i] = math.Exp(sc[i] - mx)
				sum += sc[i]
			}
			p := ps[jh*keys : (jh+1)*keys]
			clear(p)
			clear(acc)
			for i, t := range vis {
				w := sc[i] / sum
				p[t] = T(w)
				vt := vs[t*kvd+g*hd : t*kvd+(g+1)*hd]
				for d, vv := range vt {
					acc[d] += w * float64(vv)
				}
			}
			oj := os[j*qd+hh*hd : j*qd+(hh+1)*hd]
			for d := range oj {
				oj[d] = T(acc[d])
			}
		}
	})
}

// AttentionBackward splits the work by KV head: the queries of one group
// are the only writers of that head's columns of dk and dv.
//
// With p the weights of one query row and head: dp_t = dout·v_t,
// ds_t = p_t(dp_t − Σ p·dp); dq += scale·Σ ds_t k_t; dk_t += scale·ds_t q;
// dv_t += p_t dout.
func (h *host[T]) AttentionBackward(dq, dk, dv, dout, probs, q, k, v Buffer, a Attn) {
	checkAttn("AttentionBackward", a)
	hd, keys := a.HeadDim, a.Keys()
	qd, kvd := a.Heads*hd, a.KVHeads*hd
	dqs, dks, dvs, ds, ps, qs, ks, vs := h.s(dq), h.s(dk), h.s(dv), h.s(dout), h.s(probs), h.s(q), h.s(k), h.s(v)
	need("AttentionBackward", a.Rows*qd, dqs, ds, qs)
	need("AttentionBackward", a.Rows*a.Heads*keys, ps)
	need("AttentionBackward", keys*kvd, dks, dvs, ks, vs)
	scale := 1 / math.Sqrt(float64(hd))
	group := a.Heads / a.KVHeads
	h.par(a.KVHeads, a.Rows*group*keys*hd*4, func(_, glo, ghi int) {
		dp := make([]float64, keys)
		dqa := make([]float64, hd)
		for g := glo; g < ghi; g++ {
			for j := range a.Rows {
				lim := a.keyLimit(j)
				for hh := g * group; hh < (g+1)*group; hh++ {
					jh := j*a.Heads + hh
					p := ps[jh*keys : (jh+1)*keys]
					dj := ds[j*qd+hh*hd : j*qd+(hh+1)*hd]
					qj := qs[j*qd+hh*hd : j*qd+(hh+1)*hd]
					var sum float64
					for t := 0; t < lim; t++ {
						if p[t] == 0 {
							dp[t] = 0
							continue
						}
						vt := vs[t*kvd+g*hd : t*kvd+(g+1)*hd]
						var s float64
						for d, x := range dj {
							s += float64(x) * float64(vt[d])
						}
						dp[t] = s
						sum += float64(p[t]) * s
					}
					clear(dqa)
					for t := 0; t < lim; t++ {
						pt := float64(p[t])
						if pt == 0 {
							continue
						}
						dsc := pt * (dp[t] - sum) * scale
						kt := ks[t*kvd+g*hd : t*kvd+(g+1)*hd]
						dkt := dks[t*kvd+g*hd : t*kvd+(g+1)*hd]
						dvt := dvs[t*kvd+g*hd : t*kvd+(g+1)*hd]
						for d := range hd {
							dqa[d] += dsc * float64(kt[d])
							dkt[d] += T(dsc * float64(qj[d]))
							dvt[d] += T(pt * float64(dj[d]))
						}
					}
					dqj := dqs[j*qd+hh*hd : j*qd+(hh+1)*hd]
					for d := range dqj {
						dqj[d] += T(dqa[d])
					}
				}
			}
		}
	})
}
