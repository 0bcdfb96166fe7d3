package device

import (
	"math"

	"dovetail/internal/fastmath"
)

// exp is e^x at the device's precision: math.Exp for float64 (the
// gradient checks), and fastmath.Expf for float32, several times faster,
// since the softmaxes of attention and of the vocabulary call it for every
// score.
func exp[T float32 | float64](x float64) float64 {
	var z T
	if _, ok := any(z).(float64); ok {
		return math.Exp(x)
	}
	return float64(fastmath.Expf(float32(x)))
}
