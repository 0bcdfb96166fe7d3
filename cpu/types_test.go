package cpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"dovetail/cpu/kernels"
	"dovetail/cpu/reference"
	"dovetail/models"
	"dovetail/models/synth"
	"dovetail/models/synth/synthtest"
	"dovetail/quant"
)

// typesShape is small enough to build in a test and has rows of whole
// 256-value blocks, so every k- and i-quant applies to every matrix.
var typesShape = synth.Shape{Dim: 256, Layers: 2, Heads: 4, KVHeads: 2, FFN: 512, Vocab: 512, Ctx: 64}

// typesModel writes typesShape in weight type typ (seed 7: the same floats
// before quantization for every type) and loads it.
func typesModel(t *testing.T, typ quant.Type) *models.Llama {
	return synthtest.Model(t, typesShape, synth.Options{Type: typ, Seed: 7})
}

// typesLogits decodes prompt one batch, then two tokens one at a time, and
// returns every row's logits.
func typesLogits(t *testing.T, tg *Target, prompt []int) [][]float32 {
	t.Helper()
	par := make([]int, len(prompt))
	for i := range par {
		par[i] = i - 1
	}
	lg, _, err := tg.Extend(prompt, par)
	if err != nil {
		t.Fatal(err)
	}
	rows := cloneRows(lg)
	keep := make([]int, len(prompt))
	for i := range keep {
		keep[i] = i
	}
	if err := tg.Commit(keep); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []int{17, 301} {
		l, err := tg.Forward([]int{tok})
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, slices.Clone(l))
	}
	return rows
}

// relErr is the largest difference over the largest magnitude of want.
func relErr(got, want []float32) float64 {
	var d, m float64
	for i := range want {
		d = math.Max(d, math.Abs(float64(got[i]-want[i])))
		m = math.Max(m, math.Abs(float64(want[i])))
	}
	return d / m
}

// TestWeightTypesForward runs a model written in each weight type users
// download at every kernel level: within the type's quantization error of
// its f32 twin at every level; the Go level equal to the reference bit for
// bit; the first position (every matrix of the type, attention an
// identity) within float rounding of the Go level. Later positions may
// differ more between levels: a float sum in another order can round an
// activation to the next int8 or f16 value, and this random model
// amplifies that to about 1% of its logits.
func TestWeightTypesForward(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	prompt := []int{1, 403, 407, 261, 380, 300}
	goK, err := kernels.ByName("go")
	if err != nil {
		t.Fatal(err)
	}
	twin := typesLogits(t, NewTargetWith(NewFast(typesModel(t, quant.F32), goK, pool, 0)), prompt)
	// The bounds are 1.5 times the error measured at the Go level (random
	// weights: far from what a trained model's logits show).
	// first bounds the first position against the Go level: 1e-5, but
	// BF16's activations are rounded to bf16 (8 bits) as llama.cpp's are,
	// so where two sum orders differ in the last float bit an activation
	// can land on the other side of a bf16 step (measured 1.1e-3).
	first := map[quant.Type]float64{quant.BF16: 2e-3}
	for _, c := range []struct {
		typ   quant.Type
		bound float64
	}{
		{quant.Q8_0, 0.03}, {quant.Q6_K, 0.09}, {quant.Q3_K, 0.6}, {quant.Q2_K, 1.2}, {quant.Q5_K, 0.16}, {quant.Q4_K, 0.27},
		{quant.Q4_0, 0.4}, {quant.Q5_0, 0.18}, {quant.IQ4_NL, 0.33}, {quant.IQ4_XS, 0.3},
		{quant.Q4_1, 0.37}, {quant.Q5_1, 0.18}, {quant.F16, 0.0015}, {quant.BF16, 0.0096},
	} {
		m := typesModel(t, c.typ)
		if m.Layers[0].Q.Type != c.typ || m.Layers[1].Down.Type != c.typ {
			t.Fatalf("%v: the model holds %v and %v", c.typ, m.Layers[0].Q.Type, m.Layers[1].Down.Type)
		}
		want := typesLogits(t, NewTargetWith(NewFast(m, goK, pool, 0)), prompt)
		ref := reference.New(m, pool.Threads(), 0)
		rs := ref.NewState()
		rl := make([]float32, m.Config.Vocab)
		for i, tok := range append(slices.Clone(prompt), 17, 301) {
			ref.Forward(rs, tok, rl, nil)
			if !slices.Equal(rl, want[i]) {
				t.Errorf("%v: Go level row %d differs from the reference", c.typ, i)
			}
		}
		if e := worstErr(want, twin); e > c.bound {
			t.Errorf("%v: logits within %.4f of the f32 twin, bound %.4f", c.typ, e, c.bound)
		}
		for _, k := range levels(t) {
			got := typesLogits(t, NewTargetWith(NewFast(m, k, pool, 0)), prompt)
			if e := relErr(got[0], want[0]); e > max(first[c.typ], 1e-5) {
				t.Errorf("%v at %s: first position within %.2g of the Go level", c.typ, k.Name, e)
			}
			if e := worstErr(got, twin); e > c.bound {
				t.Errorf("%v at %s: logits within %.4f of the f32 twin, bound %.4f", c.typ, k.Name, e, c.bound)
			}
		}
	}
}

// worstErr is relErr's largest value over the rows.
func worstErr(got, want [][]float32) float64 {
	var worst float64
	for i := range want {
		worst = math.Max(worst, relErr(got[i], want[i]))
	}
	return worst
}

// iquantModels are typesShape with every layer matrix in typ, made of
// random blocks (quant cannot quantize to the 1-, 2- and 3-bit i-quants: their
// quantizers need an importance matrix), and its f32 twin, which holds
// exactly their dequantized values.
func iquantModels(t *testing.T, typ quant.Type) (m, twin *models.Llama) {
	t.Helper()
	m, twin = typesModel(t, quant.F32), typesModel(t, quant.F32)
	rng := rand.New(rand.NewPCG(uint64(typ), 9))
	for l := range m.Layers {
		a, b := &m.Layers[l], &twin.Layers[l]
		for i, mt := range []*models.Tensor{a.Q, a.K, a.V, a.O, a.Gate, a.Up, a.Down} {
			tt := []*models.Tensor{b.Q, b.K, b.V, b.O, b.Gate, b.Up, b.Down}[i]
			rb, err := typ.RowSize(mt.Cols)
			if err != nil {
				t.Fatal(err)
			}
			data := make([]byte, mt.Rows*rb)
			for j := range data {
				data[j] = byte(rng.Uint32())
			}
			// A scale per super-block of 256 values, of the size that gives
			// the f32 model's weights' magnitude.
			per := rb / (mt.Cols / quant.QKK)
			// (The 1-bit types' values are about a tenth of the others' at
			// the same scale.)
			dmin := 2e-4
			if typ == quant.IQ1_S || typ == quant.IQ1_M {
				dmin = 2e-3
			}
			for j := 0; j < len(data); j += per {
				h := quant.F32ToF16(float32(dmin + dmin*rng.Float64()))
				if typ == quant.IQ1_M { // in the top nibbles of its last four u16
					for k := range 4 {
						o := j + per - 8 + 2*k + 1
						data[o] = data[o]&0x0f | byte(h>>(4*k)&0xf)<<4
					}
					continue
				}
				data[j], data[j+1] = byte(h), byte(h>>8)
			}
			vals := make([]float32, mt.Rows*mt.Cols)
			for r := range mt.Rows {
				if err := quant.DequantizeRow(typ, vals[r*mt.Cols:(r+1)*mt.Cols], data[r*rb:(r+1)*rb]); err != nil {
					t.Fatal(err)
				}
			}
			mt.Type, mt.RowBytes, mt.Data = typ, rb, data
			tt.Data = make([]byte, 4*len(vals))
			for j, v := range vals {
				binary.LittleEndian.PutUint32(tt.Data[4*j:], math.Float32bits(v))
			}
		}
	}
	return m, twin
}

// The 1-, 2- and 3-bit i-quants, whose C kernels take Q8_K activations: at
// every level within the activations' quantization error of the f32 twin
// of the very same weights, and the first position within float rounding
// of the Go level.
func TestIQuantsForward(t *testing.T) {
	pool := NewPool(2)
	defer pool.Close()
	prompt := []int{1, 403, 407, 261, 380, 300}
	goK, err := kernels.ByName("go")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []quant.Type{quant.IQ2_XXS, quant.IQ2_XS, quant.IQ2_S, quant.IQ3_XXS, quant.IQ1_S, quant.IQ1_M} {
		m, twin := iquantModels(t, typ)
		want := typesLogits(t, NewTargetWith(NewFast(twin, goK, pool, 0)), prompt)
		ref := typesLogits(t, NewTargetWith(NewFast(m, goK, pool, 0)), prompt)
		const bound = 0.05 // measured: 0.001 (IQ2_*), 0.0125 (IQ3_XXS), 0.002 (IQ1_*)
		if e := worstErr(ref, want); e > bound {
			t.Errorf("%v at go: logits within %.4f of the f32 twin, bound %.4f", typ, e, bound)
		}
		for _, k := range levels(t) {
			got := typesLogits(t, NewTargetWith(NewFast(m, k, pool, 0)), prompt)
			if e := relErr(got[0], ref[0]); e > 1e-5 {
				t.Errorf("%v at %s: first position within %.2g of the Go level", typ, k.Name, e)
			}
			if e := worstErr(got, want); e > bound {
				t.Errorf("%v at %s: logits within %.4f of the f32 twin, bound %.4f", typ, k.Name, e, bound)
			}
			t.Logf("%v at %s: within %.5f of the twin", typ, k.Name, worstErr(got, want))
		}
	}
}
