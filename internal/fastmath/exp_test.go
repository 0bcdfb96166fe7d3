package fastmath

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestExpf(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 1_000_000; i++ {
		x := float32(rng.Float64()*175 - 87)
		want := math.Exp(float64(x))
		got := float64(Expf(x))
		if math.Abs(got-want) > 4e-7*want {
			t.Fatalf("Expf(%v) = %v, want %v", x, got, want)
		}
	}
	if Expf(100) != float32(math.Inf(1)) || Expf(-100) != 0 || Expf(0) != 1 {
		t.Error("range ends")
	}
}

func BenchmarkExpf(b *testing.B) {
	x := float32(0.3)
	for b.Loop() {
		x = Expf(x) - 1
	}
}

func BenchmarkMathExp(b *testing.B) {
	x := 0.3
	for b.Loop() {
		x = math.Exp(x) - 1
	}
}
