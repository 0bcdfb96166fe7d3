package reference

import (
	"math"
	"sync"

	"dovetail/models"
)

// These are the pure-Go reference operations of the forward pass. Outputs
// come first; shapes are in the comments.

// rmsnorm: out[n] = x[n] / sqrt(mean(x²) + eps) * weight[n].
func rmsnorm(out, x, weight []float32, eps float32) {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	scale := float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
	for i, v := range x {
		out[i] = v * scale * weight[i]
	}
}

// rope rotates each head of x[heads×HeadDim] in place for position pos:
// pair j of the first RopeDim dimensions turns by
// (pos/RopeScale) · RopeTheta^(−2j/RopeDim) / freqs[j] (freqs nil: 1),
// adjacent pairs (RopeNorm) or halves (RopeNeox). The angles are
// computed as the CPU target's table computes them, bit for bit.
func rope(x []float32, heads int, c models.Config, freqs []float32, pos int) {
	pairs := c.RopeDim / 2
	for j := 0; j < pairs; j++ {
		theta := math.Pow(float64(c.RopeTheta), -2*float64(j)/float64(c.RopeDim))
		if freqs != nil {
			theta /= float64(freqs[j])
		}
		angle := float64(pos) / float64(c.RopeScale) * theta
		cos, sin := float32(math.Cos(angle)), float32(math.Sin(angle))
		for h := 0; h < heads; h++ {
			v := x[h*c.HeadDim : (h+1)*c.HeadDim]
			a, b := 2*j, 2*j+1 // RopeNorm: adjacent pairs
			if c.RopeStyle == models.RopeNeox {
				a, b = j, j+pairs
			}
			x0, x1 := v[a], v[b]
			// Each product rounded, as the kernels' RoPE does: no fused
			// multiply-add, whatever GOAMD64 allows the compiler.
			v[a] = float32(x0*cos) - float32(x1*sin)
			v[b] = float32(x0*sin) + float32(x1*cos)
		}
	}
}

// softmax in place, stable against large inputs.
func softmax(x []float32) {
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var sum float64
	for i, v := range x {
		e := math.Exp(float64(v - mx))
		x[i] = float32(e)
		sum += e
	}
	inv := float32(1 / sum)
	for i := range x {
		x[i] *= inv
	}
}

// swiglu: out[n] = silu(gate[n]) * up[n].
func swiglu(out, gate, up []float32) {
	for i, g := range gate {
		out[i] = g / (1 + float32(math.Exp(float64(-g)))) * up[i]
	}
}

func add(dst, x []float32) {
	for i := range dst {
		dst[i] += x[i]
	}
}

func dot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// parallel runs fn over [0, n) in up to threads contiguous pieces, the
// caller's goroutine taking the first.
func parallel(threads, n int, fn func(lo, hi int)) {
	pieces := min(threads, n)
	if pieces <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	for i := 1; i < pieces; i++ {
		wg.Go(func() { fn(i*n/pieces, (i+1)*n/pieces) })
	}
	fn(0, n/pieces)
	wg.Wait()
}
