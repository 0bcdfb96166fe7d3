// Package dgftest is what the tests of the draft model, its training and
// the devices it runs on share: a stand-in target, a tiny draft shape,
// random windows of features, float comparisons.
package dgftest

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"dovetail/models"
	"dovetail/models/draft"
	"dovetail/quant"
)

// TinyConfig is a draft small enough for gradient checks.
var TinyConfig = draft.Config{Hidden: 8, Blocks: 2, Heads: 2, KVHeads: 1, HeadDim: 4, FFN: 12, Vocab: 16,
	Context: 64, RopeTheta: 10000, RMSEps: 1e-5}

// Stories260KDraft and TinyStories656KDraft are the drafts (M = 1) of the
// two test models' shapes: the benchmarks' small shapes.
var (
	Stories260KDraft = draft.Config{Hidden: 64, Blocks: 1, Heads: 8, KVHeads: 4, HeadDim: 8, FFN: 172, Vocab: 512,
		Context: 512, RopeTheta: 10000, RMSEps: 1e-5}
	TinyStories656KDraft = draft.Config{Hidden: 128, Blocks: 1, Heads: 8, KVHeads: 4, HeadDim: 16, FFN: 384, Vocab: 2048,
		Context: 512, RopeTheta: 10000, RMSEps: 1e-6}
)

// TinyLlamaDraft is the draft of a TinyLlama-1.1B target (M = 1), the
// smallest real target whose draft is worth a GPU: the benchmarks' large
// shape.
var TinyLlamaDraft = draft.Config{Hidden: 2048, Blocks: 1, Heads: 32, KVHeads: 4, HeadDim: 64, FFN: 5632, Vocab: 32000,
	Context: 2048, RopeTheta: 10000, RMSEps: 1e-5}

// Target is what a draft reads of a target, drawn from seed: embeddings
// and LM head, float32.
func Target(seed uint64, c draft.Config) *models.Llama {
	return FakeTarget(rand.New(rand.NewPCG(seed, 0)), c.Hidden, c.Vocab)
}

// FakeTarget is what a draft reads of a target: embeddings and LM head.
func FakeTarget(rng *rand.Rand, hidden, vocab int) *models.Llama {
	m := &models.Llama{Config: models.Config{Hidden: hidden, Vocab: vocab}}
	m.TokenEmbd = F32Tensor("token_embd.weight", vocab, hidden, RandVals(rng, vocab*hidden, 1))
	m.Output = F32Tensor("output.weight", vocab, hidden, RandVals(rng, vocab*hidden, 1))
	return m
}

// RandWindow is T+1 random tokens with features uniform in ±scale.
func RandWindow(rng *rand.Rand, T, hidden, vocab int, scale float64) draft.Window {
	w := draft.Window{}
	for range T + 1 {
		w.Tokens = append(w.Tokens, rng.IntN(vocab))
		f := make([]float32, hidden)
		for i := range f {
			f[i] = float32(scale * (2*rng.Float64() - 1))
		}
		w.Features = append(w.Features, f)
	}
	return w
}

// RandVals is n values uniform in ±scale.
func RandVals(rng *rand.Rand, n int, scale float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = scale * (2*rng.Float64() - 1)
	}
	return v
}

// F32Tensor makes a frozen-matrix tensor of rows × cols from values.
func F32Tensor(name string, rows, cols int, v []float64) *models.Tensor {
	data := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(x)))
	}
	return &models.Tensor{Name: name, Type: quant.F32, Rows: rows, Cols: cols, RowBytes: 4 * cols, Data: data}
}

// Q8Tensor makes a Q8_0 tensor of rows × cols from values.
func Q8Tensor(name string, rows, cols int, v []float64) *models.Tensor {
	f := make([]float32, len(v))
	for i, x := range v {
		f[i] = float32(x)
	}
	rb, _ := quant.Q8_0.RowSize(cols)
	data := make([]byte, rows*rb)
	for r := range rows {
		if err := quant.QuantizeRow(quant.Q8_0, data[r*rb:(r+1)*rb], f[r*cols:(r+1)*cols]); err != nil {
			panic(err)
		}
	}
	return &models.Tensor{Name: name, Type: quant.Q8_0, Rows: rows, Cols: cols, RowBytes: rb, Data: data}
}

// CloseTo fails t when got differs from want by more than tol relative
// to max(1, |want|) anywhere.
func CloseTo(t testing.TB, what string, got, want []float32, tol float64) {
	t.Helper()
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > tol*max(1, math.Abs(float64(want[i]))) {
			t.Fatalf("%s[%d] = %g, want %g", what, i, got[i], want[i])
		}
	}
}

// CentralDiff is the derivative of loss with respect to x[j] by central
// differences of step eps, x[j] left as it was: what gradient checks hold
// a backward pass to.
func CentralDiff(x []float64, j int, eps float64, loss func() float64) float64 {
	orig := x[j]
	x[j] = orig + eps
	lp := loss()
	x[j] = orig - eps
	lm := loss()
	x[j] = orig
	return (lp - lm) / (2 * eps)
}
