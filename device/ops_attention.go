package device

import (
	"fmt"
	"math"
)

// ropeAngle is the rotation of pair i of a head of hd dimensions at pos.
func ropeAngle(pos, i, hd int, theta float32) float64 {
	return float64(pos) * math.Pow(float64(theta), -2*float64(i)/float64(hd))
}

// ropeFreqAngle is ropeAngle with pair i's frequency divided by freqs[i]
// (none when freqs is nil).
func ropeFreqAngle(pos, i, hd int, theta float32, freqs []float32) float64 {
	if freqs == nil {
		return ropeAngle(pos, i, hd, theta)
	}
	return ropeAngle(pos, i, hd, theta) / float64(freqs[i])
}

// rope rotates every pair by sign·angle (sign −1: the inverse, which is
// also the transpose, hence the backward pass).
func (h *host[T]) rope(op string, x Buffer, pos []int, heads, hd int, theta float32, freqs []float32, sign float64) {
	xs := h.s(x)
	need(op, len(pos)*heads*hd, xs)
	if hd%2 != 0 {
		panic(fmt.Sprintf("device: %s: odd head dimension %d", op, hd))
	}
	if freqs != nil && len(freqs) != hd/2 {
		panic(fmt.Sprintf("device: %s: %d frequency factors for %d pairs", op, len(freqs), hd/2))
	}
	h.par(len(pos), heads*hd*4, func(_, lo, hi int) {
		cs := make([]float64, hd)
		for r := lo; r < hi; r++ {
			for i := 0; i < hd/2; i++ {
				s, c := math.Sincos(sign * ropeFreqAngle(pos[r], i, hd, theta, freqs))
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
	h.rope("RoPE", x, pos, heads, hd, theta, nil, 1)
}

func (h *host[T]) RoPEBackward(dx Buffer, pos []int, heads, hd int, theta float32) {
	h.rope("RoPEBackward", dx, pos, heads, hd, theta, nil, -1)
}

func (h *host[T]) RoPEFreqs(x Buffer, pos []int, heads, hd int, theta float32, freqs []float32) {
	h.rope("RoPEFreqs", x, pos, heads, hd, theta, freqs, 1)
}

func (h *host[T]) RoPEFreqsBackward(dx Buffer, pos []int, heads, hd int, theta float32, freqs []float32) {
	h.rope("RoPEFreqsBackward", dx, pos, heads, hd, theta, freqs, -1)
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

// Attention works head by head as matrix products on the kernels' matmul
// (strided rows, no copies of q, k or the weights): scores S = q_h·k_gᵀ go
// straight into probs, are masked and softmaxed in place, and out_h = P·v_g.
// Masked scores are computed and then dropped: with the SIMD product that
// costs less than skipping them one by one.
func (h *host[T]) Attention(out, probs, q, k, v Buffer, a Attn) {
	a.Check("Attention")
	hd, keys, rows := a.HeadDim, a.Keys(), a.Rows
	qd, kvd := a.Heads*hd, a.KVHeads*hd
	os, ps, qs, ks, vs := h.s(out), h.s(probs), h.s(q), h.s(k), h.s(v)
	need("Attention", rows*qd, os, qs)
	need("Attention", rows*a.Heads*keys, ps)
	need("Attention", keys*kvd, ks, vs)
	scale := 1 / math.Sqrt(float64(hd))
	group := a.Heads / a.KVHeads
	lp := a.Heads * keys // stride between a head's rows in probs
	h.par(a.KVHeads, rows*keys*hd*2*group, func(_, glo, ghi int) {
		vt := h.scratch(hd * keys)
		for g := glo; g < ghi; g++ {
			transposeStrided(vt, vs[g*hd:], kvd, keys, hd)
			for hh := g * group; hh < (g+1)*group; hh++ {
				p := ps[hh*keys:]
				h.ntRange(p, lp, qs[hh*hd:], qd, ks[g*hd:], kvd, rows, hd, 0, keys)
				for j := range rows {
					softmaxRow(p[j*lp:j*lp+keys], a, j, scale)
				}
				h.ntRange(os[hh*hd:], qd, p, lp, vt, keys, rows, keys, 0, hd)
			}
		}
		h.put(vt)
	})
}

// softmaxRow turns row j's raw scores into attention weights: scaled,
// masked (0), normalized. The maximum and sum are taken in float64.
func softmaxRow[T float32 | float64](p []T, a Attn, j int, scale float64) {
	lim := a.keyLimit(j)
	mx := math.Inf(-1)
	for t := range lim {
		if a.visible(j, t) {
			mx = max(mx, float64(p[t])*scale)
		}
	}
	var sum float64
	for t := range lim {
		if a.visible(j, t) {
			e := exp[T](float64(p[t])*scale - mx)
			p[t] = T(e)
			sum += e
		} else {
			p[t] = 0
		}
	}
	clear(p[lim:])
	inv := 1 / sum
	for t := range lim {
		p[t] = T(float64(p[t]) * inv)
	}
}

// transposeStrided: dst[c×r] = the r × c block of src whose rows are ld
// apart. It goes in tiles so that both sides stay in cache.
func transposeStrided[T float32 | float64](dst, src []T, ld, r, c int) {
	const tile = 16
	for i0 := 0; i0 < r; i0 += tile {
		for j0 := 0; j0 < c; j0 += tile {
			for i := i0; i < min(i0+tile, r); i++ {
				row := src[i*ld : i*ld+c]
				for j := j0; j < min(j0+tile, c); j++ {
					dst[j*r+i] = row[j]
				}
			}
		}
	}
}

// addStrided: dst's r × c block with rows ld apart += src[r×c].
func addStrided[T float32 | float64](dst []T, ld int, src []T, r, c int) {
	for i := range r {
		addTo(dst[i*ld:i*ld+c], src[i*c:(i+1)*c])
	}
}

// AttentionBackward, per KV head g (its queries are the only writers of
// g's columns of dk and dv) and per query head h of the group, with P the
// weights:
//
//	dP = dout_h · v_gᵀ                  [rows × keys]
//	dS = P ⊙ (dP − rowsum(P ⊙ dP)) · scale
//	dq_h += dS · k_g;  dk_g += dSᵀ · q_h;  dv_g += Pᵀ · dout_h
//
// each a kernel product on transposed copies where the kernel needs rows.
func (h *host[T]) AttentionBackward(dq, dk, dv, dout, probs, q, k, v Buffer, a Attn) {
	a.Check("AttentionBackward")
	hd, keys, rows := a.HeadDim, a.Keys(), a.Rows
	qd, kvd := a.Heads*hd, a.KVHeads*hd
	dqs, dks, dvs, ds, ps, qs, ks, vs := h.s(dq), h.s(dk), h.s(dv), h.s(dout), h.s(probs), h.s(q), h.s(k), h.s(v)
	need("AttentionBackward", rows*qd, dqs, ds, qs)
	need("AttentionBackward", rows*a.Heads*keys, ps)
	need("AttentionBackward", keys*kvd, dks, dvs, ks, vs)
	scale := 1 / math.Sqrt(float64(hd))
	group := a.Heads / a.KVHeads
	lp := a.Heads * keys
	h.par(a.KVHeads, rows*keys*hd*6*group, func(_, glo, ghi int) {
		dS, dST, pT := h.scratch(rows*keys), h.scratch(keys*rows), h.scratch(keys*rows)
		kT, qT, doT := h.scratch(hd*keys), h.scratch(hd*rows), h.scratch(hd*rows)
		tq, tkv := h.scratch(rows*hd), h.scratch(keys*hd)
		for g := glo; g < ghi; g++ {
			transposeStrided(kT, ks[g*hd:], kvd, keys, hd)
			for hh := g * group; hh < (g+1)*group; hh++ {
				p := ps[hh*keys:]
				h.ntRange(dS, keys, ds[hh*hd:], qd, vs[g*hd:], kvd, rows, hd, 0, keys)
				for j := range rows {
					pj, dj := p[j*lp:j*lp+keys], dS[j*keys:(j+1)*keys]
					var dot float64
					for t, pv := range pj {
						dot += float64(pv) * float64(dj[t])
					}
					for t, pv := range pj {
						dj[t] = T(float64(pv) * (float64(dj[t]) - dot) * scale)
					}
				}
				h.ntRange(tq, hd, dS, keys, kT, keys, rows, keys, 0, hd)
				addStrided(dqs[hh*hd:], qd, tq, rows, hd)
				transpose(dST, dS, rows, keys)
				transposeStrided(qT, qs[hh*hd:], qd, rows, hd)
				h.ntRange(tkv, hd, dST, rows, qT, rows, keys, rows, 0, hd)
				addStrided(dks[g*hd:], kvd, tkv, keys, hd)
				transposeStrided(pT, p, lp, rows, keys)
				transposeStrided(doT, ds[hh*hd:], qd, rows, hd)
				h.ntRange(tkv, hd, pT, rows, doT, rows, keys, rows, 0, hd)
				addStrided(dvs[g*hd:], kvd, tkv, keys, hd)
			}
		}
		for _, b := range [][]T{dS, dST, pT, kT, qT, doT, tq, tkv} {
			h.put(b)
		}
	})
}
