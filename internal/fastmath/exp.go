// Package fastmath holds float32 functions faster than their math
// counterparts at a precision the callers can afford.
package fastmath

import "math"

// Expf is e^x in float32: a Cephes-style degree-6 polynomial on the reduced
// argument, within about 2 ulp, several times faster than math.Exp. The
// softmaxes over a whole vocabulary call it for every logit.
func Expf(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375
		ln2lo = -2.12194440e-4
	)
	if x > 88.7 {
		return float32(math.Inf(1))
	}
	if x < -87.3 {
		return 0
	}
	t := x * log2e
	var k int32
	if t >= 0 {
		k = int32(t + 0.5)
	} else {
		k = int32(t - 0.5)
	}
	n := float32(k)
	r := x - n*ln2hi - n*ln2lo
	p := float32(1.9875691500e-4)
	p = p*r + 1.3981999507e-3
	p = p*r + 8.3334519073e-3
	p = p*r + 4.1665795894e-2
	p = p*r + 1.6666665459e-1
	p = p*r + 5.0000001201e-1
	p = p*r*r + r + 1
	return p * math.Float32frombits(uint32(k+127)<<23)
}
