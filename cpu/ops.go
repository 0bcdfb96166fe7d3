package cpu

import (
	"math"

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

// ropeTable holds cos and sin of every position × dimension pair.
type ropeTable struct {
	pairs    int
	cos, sin []float32 // [pos*pairs + j]
}

// at returns position pos's cos and sin, one per pair.
func (t *ropeTable) at(pos int) (cos, sin []float32) {
	return t.cos[pos*t.pairs : (pos+1)*t.pairs], t.sin[pos*t.pairs : (pos+1)*t.pairs]
}

// newRopeTable precomputes the rotation angles: pair j of position p turns
// by (p/scale) · base^(−2j/dim) / freqs[j].
func newRopeTable(c models.Config, freqs []float32, ctx int) *ropeTable {
	pairs := c.RopeDim / 2
	t := &ropeTable{pairs: pairs, cos: make([]float32, ctx*pairs), sin: make([]float32, ctx*pairs)}
	for j := 0; j < pairs; j++ {
		theta := math.Pow(float64(c.RopeTheta), -2*float64(j)/float64(c.RopeDim))
		if freqs != nil {
			theta /= float64(freqs[j])
		}
		for p := 0; p < ctx; p++ {
			a := float64(p) / float64(c.RopeScale) * theta
			t.cos[p*pairs+j] = float32(math.Cos(a))
			t.sin[p*pairs+j] = float32(math.Sin(a))
		}
	}
	return t
}

// rope rotates each head of x[heads×headDim] in place for position pos.
func rope(x []float32, heads, headDim int, style models.RopeStyle, t *ropeTable, pos int) {
	cos, sin := t.at(pos)
	for h := 0; h < heads; h++ {
		v := x[h*headDim : (h+1)*headDim]
		for j := 0; j < t.pairs; j++ {
			a, b := 2*j, 2*j+1 // RopeNorm: adjacent pairs
			if style == models.RopeNeox {
				a, b = j, j+t.pairs
			}
			x0, x1 := v[a], v[b]
			// Each product rounded, as the kernels' RoPE does: no fused
			// multiply-add, whatever GOAMD64 allows the compiler.
			v[a] = float32(x0*cos[j]) - float32(x1*sin[j])
			v[b] = float32(x0*sin[j]) + float32(x1*cos[j])
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
