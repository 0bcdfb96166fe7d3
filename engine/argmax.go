package engine

import "math"

// argmaxFirst is the first index of x's largest value above -Inf, and that
// value; (-1, -Inf) when there is none (x empty, or all -Inf or NaN: a NaN
// is never larger). Four lanes keep their own maxima, so that no compare
// waits on the branch before it: faster than one running maximum
// (docs/measurements/kernels-attention-threads.md, "Greedy picks").
func argmaxFirst(x []float32) (int, float32) {
	inf := float32(math.Inf(-1))
	bi := [4]int{-1, -1, -1, -1}
	bv := [4]float32{inf, inf, inf, inf}
	i := 0
	for ; i+4 <= len(x); i += 4 {
		y := x[i : i+4 : i+4]
		if y[0] > bv[0] {
			bv[0], bi[0] = y[0], i
		}
		if y[1] > bv[1] {
			bv[1], bi[1] = y[1], i+1
		}
		if y[2] > bv[2] {
			bv[2], bi[2] = y[2], i+2
		}
		if y[3] > bv[3] {
			bv[3], bi[3] = y[3], i+3
		}
	}
	// Each lane holds the first index of its largest value; of lanes with
	// the same value the smallest index is the first in x.
	best, bestV := -1, inf
	for k := range bi {
		if bi[k] >= 0 && (bv[k] > bestV || bv[k] == bestV && bi[k] < best) {
			best, bestV = bi[k], bv[k]
		}
	}
	for ; i < len(x); i++ {
		if x[i] > bestV {
			best, bestV = i, x[i]
		}
	}
	return best, bestV
}
