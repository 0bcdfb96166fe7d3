package gpu

import (
	"math"
	"testing"
)

func TestExpf(t *testing.T) {
	worst := 0.0
	for x := -87.0; x < 88; x += 0.001 {
		got, want := float64(expf(float32(x))), math.Exp(float64(float32(x)))
		worst = max(worst, math.Abs(got-want)/want)
	}
	if worst > 5e-7 {
		t.Errorf("expf: worst relative error %.3g", worst)
	}
	if expf(-100) != 0 || !math.IsInf(float64(expf(100)), 1) {
		t.Error("expf out of range")
	}
}

func BenchmarkExpf(b *testing.B) {
	var s float32
	for i := range b.N {
		s += expf(-float32(i&1023) * 0.01)
	}
	_ = s
}

func BenchmarkMathExp(b *testing.B) {
	var s float64
	for i := range b.N {
		s += math.Exp(-float64(i&1023) * 0.01)
	}
	_ = s
}
