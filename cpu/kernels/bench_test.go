package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"dovetail/quant"
)

// The MatMul benchmarks report weight bytes per second (b.SetBytes is the
// matrix size, read once per call whatever n is). Shapes: 2048×768 (a
// stories110M MLP matrix, 0.4-6 MB: it stays in cache between calls),
// 4096×4096 (7B attention, 9-64 MB: in this machine's L3), and
// 4096×4096-cold, which cycles through copies totalling over 256 MB so that
// every call streams its weights from DRAM, as a decode step does. The
// ratio of n=16 to n=1 time is the cost of verifying 16 tokens over
// decoding one.
//
//	go test -run '^$' -bench MatMul -benchtime 2x ./cpu/kernels/

type benchShape struct {
	name       string
	rows, cols int
	cold       bool
}

var benchShapes = []benchShape{
	{"2048x768", 2048, 768, false},
	{"4096x4096", 4096, 4096, false},
	{"4096x4096-cold", 4096, 4096, true},
}

func BenchmarkMatMul(b *testing.B) {
	for _, k := range table {
		t := k.t
		for _, s := range sets(b) {
			for _, sh := range benchShapes {
				if sh.cold && (t == quant.BF16 || t == quant.F32) {
					continue // same streaming as F16, and 64 MB a copy
				}
				for _, n := range []int{1, 4, 16, 64} {
					if (s.Name == "go" || sh.cold) && n != 1 && n != 16 {
						continue
					}
					b.Run(fmt.Sprintf("%v/%s/%s/n=%d", t, s.Name, sh.name, n), func(b *testing.B) {
						benchMatMul(b, s, t, sh, n)
					})
				}
			}
		}
	}
}

// benchWeights caches one random matrix per type and shape; cold shapes get
// copies of it.
var benchWeights = map[string][][]byte{}

func weightsFor(t quant.Type, sh benchShape) [][]byte {
	key := fmt.Sprintf("%v/%s", t, sh.name)
	if w, ok := benchWeights[key]; ok {
		return w
	}
	wsz, _ := t.RowSize(sh.cols)
	w := make([]byte, sh.rows*wsz)
	r := rand.New(rand.NewPCG(1, 2))
	// Random bytes with random scales: quantizing 16M values would take
	// longer than the benchmarks, and kernels do not care.
	randWeights(r, t, sh.rows, sh.cols, wsz, w, false)
	ws := [][]byte{w}
	if sh.cold {
		for total := len(w); total < 256<<20; total += len(w) {
			ws = append(ws, append([]byte(nil), w...))
		}
	}
	benchWeights[key] = ws
	return ws
}

func benchMatMul(b *testing.B, s *Set, t quant.Type, sh benchShape, n int) {
	ws := weightsFor(t, sh)
	wsz, _ := t.RowSize(sh.cols)
	asz, _ := ActivationType(t).RowSize(sh.cols)
	act := make([]byte, n*asz)
	randActs(rand.New(rand.NewPCG(3, 4)), t, n, sh.cols, asz, act)
	out := make([]float32, n*sh.rows)
	b.SetBytes(int64(len(ws[0])))
	i := 0
	for b.Loop() {
		s.MatMul(t, out, sh.rows, ws[i%len(ws)], wsz, 0, sh.rows, act, asz, n, sh.cols)
		i++
	}
}

// BenchmarkMatMulPacked is BenchmarkMatMul over packed weights (the
// layout cpu.Fast multiplies at AVX-512 and AMX), on one thread and, as
// "threads2", on a C thread pool of two.
//
//	go test -run '^$' -bench MatMulPacked -benchtime 20x ./cpu/kernels/
func BenchmarkMatMulPacked(b *testing.B) {
	for _, k := range table {
		t := k.t
		if k.layouts != packable {
			continue
		}
		for _, s := range sets(b) {
			if s.PackRows == 0 {
				continue
			}
			for _, sh := range benchShapes {
				ws := weightsFor(t, sh)
				wsz, _ := t.RowSize(sh.cols)
				pks := make([]*Packed, len(ws))
				for i, w := range ws {
					pks[i] = s.Pack(t, w, wsz, sh.rows, sh.cols)
				}
				th := s.NewThreads(2)
				for _, n := range []int{1, 4, 16, 64} {
					asz, _ := ActivationType(t).RowSize(sh.cols)
					act := make([]byte, n*asz)
					randActs(rand.New(rand.NewPCG(3, 4)), t, n, sh.cols, asz, act)
					out := make([]float32, n*sh.rows)
					b.Run(fmt.Sprintf("%v/%s/%s/n=%d", t, s.Name, sh.name, n), func(b *testing.B) {
						b.SetBytes(int64(len(ws[0])))
						i := 0
						for b.Loop() {
							s.MatMulPacked(out, sh.rows, pks[i%len(pks)], 0, sh.rows, act, asz, n)
							i++
						}
					})
					if th != nil {
						b.Run(fmt.Sprintf("%v/%s/%s/n=%d/threads2", t, s.Name, sh.name, n), func(b *testing.B) {
							b.SetBytes(int64(len(ws[0])))
							i := 0
							for b.Loop() {
								th.MatMulPacked(out, sh.rows, pks[i%len(pks)], act, asz, n, max(sh.rows/16/8, 4))
								i++
							}
						})
					}
				}
				th.Close()
			}
		}
	}
}

// BenchmarkCall measures a kernel call that does almost no work: for a C
// level, the cost of crossing into C through purego and back.
func BenchmarkCall(b *testing.B) {
	for _, s := range sets(b) {
		b.Run(s.Name, func(b *testing.B) {
			x, out := []float32{1}, []float32{0}
			for b.Loop() {
				s.SiLUMul(out, x, x)
			}
		})
	}
}

// BenchmarkRoPE: the query row of a 7B-like model (32 heads of 128).
func BenchmarkRoPE(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 8))
	x := randFloats(r, 32*128, 1)
	// Unit rotations, so that repeating them keeps x normal (shrinking
	// values would turn subnormal and slow every level down).
	cos, sin := make([]float32, 64), make([]float32, 64)
	for j := range cos {
		a := r.Float64() * 6
		cos[j], sin[j] = float32(math.Cos(a)), float32(math.Sin(a))
	}
	for _, s := range sets(b) {
		for _, neox := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/neox=%v", s.Name, neox), func(b *testing.B) {
				for b.Loop() {
					s.RoPE(x, 32, 128, 64, neox, cos, sin)
				}
			})
		}
	}
}

func BenchmarkQuantize(b *testing.B) {
	x := randFloats(rand.New(rand.NewPCG(5, 6)), 4096, 1)
	dst := make([]byte, 4096/256*292)
	for _, s := range sets(b) {
		b.Run("Q8_0/"+s.Name, func(b *testing.B) {
			for b.Loop() {
				s.QuantizeQ8_0(dst, x)
			}
		})
		b.Run("Q8_K/"+s.Name, func(b *testing.B) {
			for b.Loop() {
				s.QuantizeQ8_K(dst, x)
			}
		})
	}
}

// BenchmarkAttention: one layer of a 7B-like model (32 heads, 8 KV heads
// as Llama 3's and Mistral's, head dimension 128) at 512 committed
// positions, for a decode row and for a 16-row tree; "mha/" with 32 KV
// heads, one a head (Llama 2 7B's).
func BenchmarkAttention(b *testing.B) {
	const heads, hd, past = 32, 128, 512
	r := rand.New(rand.NewPCG(7, 8))
	for _, kvHeads := range []int{8, heads} {
		prefix := ""
		if kvHeads == heads {
			prefix = "mha/"
		}
		for _, n := range []int{1, 16} {
			T := past + n
			kc, vc := randKV(r, T*kvHeads*hd)
			q := randFloats(r, n*heads*hd, 1)
			mask := treeMask(r, n)
			out, scratch := make([]float32, n*heads*hd), make([]float32, AttentionScratch(past, n))
			for _, s := range sets(b) {
				b.Run(fmt.Sprintf("%s%s/n=%d", prefix, s.Name, n), func(b *testing.B) {
					for b.Loop() {
						s.Attention(out, q, kc, vc, past, n, mask, heads, kvHeads, hd, 0.088, 0, n, scratch)
					}
				})
			}
		}
	}
}
