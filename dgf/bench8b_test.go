package dgf

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"dovetail/device"
	"dovetail/device/cuda"
	"dovetail/models"
	"dovetail/models/draft"
	"dovetail/quant"
)

// llama31EAGLE3 is the EAGLE-3 draft published for
// Llama-3.1-8B-Instruct (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B): one layer
// over [embedding ‖ state], a head over 32000 of the target's tokens.
var llama31EAGLE3 = draft.Config{Hidden: 4096, Blocks: 1, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 14336,
	Vocab: 128256, Context: 2048, RopeTheta: 500000, RMSEps: 1e-5,
	Kind: draft.EAGLE3, DraftVocab: 32000, Aux: [3]int{2, 16, 29}}

// llama31DGF is Dovetail's draft (M = 1) of the same target.
var llama31DGF = draft.Config{Hidden: 4096, Blocks: 1, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 14336,
	Vocab: 128256, Context: 2048, RopeTheta: 500000, RMSEps: 1e-5}

// BenchmarkDraftTree8B is BenchmarkDraftTree for drafts of Llama-3.1-8B's
// shape on the host at 1 and 2 threads, in their drafting form, beside a
// target whose embeddings are Q4_K and LM head Q6_K (a Q4_K_M file's):
// the 6 × 8 tree, and a round as the engine drafts it (the root's
// position, then Depth levels of TopK nodes): Dovetail's laptop and
// server depths at top-k 10, and a chain of 7 (top-k 1, as vLLM drafts
// EAGLE-3). They take GBs and minutes, so they run only when -bench names
// them (with "8B").
func BenchmarkDraftTree8B(b *testing.B) {
	if f := flag.Lookup("test.bench"); f == nil || !strings.Contains(f.Value.String(), "8B") {
		b.Skip("name it: -bench DraftTree8B (GBs of weights)")
	}
	m := llama31Target(b)
	devs := map[string]device.Device{"t1": device.NewHost(1), "t2": device.NewHost(2)}
	if dev, err := cuda.Open(0); err == nil {
		devs["cuda"] = dev
	}
	for _, c := range []draft.Config{llama31EAGLE3, llama31DGF} {
		b.Run(c.Kind.String(), func(b *testing.B) {
			for _, name := range []string{"t1", "t2", "cuda"} {
				if dev := devs[name]; dev != nil {
					// Made only where -bench names the device: an 8B draft
					// takes a while to quantize.
					b.Run(name, func(b *testing.B) { benchRounds8B(b, newDraft8B(b, dev, c, m)) })
				}
			}
		})
	}
}

// benchRounds8B times d's rounds and frees it.
func benchRounds8B(b *testing.B, d *Draft) {
	defer d.Free()
	b.Run("tree6x8", func(b *testing.B) { benchTreeOf(b, d, 6, 8) })
	for _, r := range []struct{ depth, k int }{{4, 10}, {7, 10}, {6, 1}} {
		b.Run(fmt.Sprintf("round-d%d-k%d", r.depth, r.k), func(b *testing.B) { benchRound(b, d, r.depth, r.k) })
	}
}

// llama31Target is what a draft reads of a Llama-3.1-8B Q4_K_M target:
// Q4_K embeddings and a Q6_K LM head of its shape. Their rows repeat a
// few random ones: quantizing 500M values would take minutes, and reading
// them costs the same.
func llama31Target(b *testing.B) *models.Llama {
	rng := rand.New(rand.NewPCG(8, 8))
	c := llama31DGF
	m := &models.Llama{Config: models.Config{Hidden: c.Hidden, Vocab: c.Vocab}}
	m.TokenEmbd = tiledTensor(b, rng, "token_embd.weight", quant.Q4_K, c.Vocab, c.Hidden)
	m.Output = tiledTensor(b, rng, "output.weight", quant.Q6_K, c.Vocab, c.Hidden)
	return m
}

// tiledTensor is a rows × cols tensor of type t whose rows cycle through
// 64 random ones.
func tiledTensor(b *testing.B, rng *rand.Rand, name string, t quant.Type, rows, cols int) *models.Tensor {
	const distinct = 64
	rb, err := t.RowSize(cols)
	if err != nil {
		b.Fatal(err)
	}
	data := make([]byte, rows*rb)
	row := make([]float32, cols)
	for r := range distinct {
		for i := range row {
			row[i] = float32(0.02 * (2*rng.Float64() - 1))
		}
		if err := quant.QuantizeRow(t, data[r*rb:(r+1)*rb], row); err != nil {
			b.Fatal(err)
		}
	}
	for r := distinct; r < rows; r++ {
		copy(data[r*rb:(r+1)*rb], data[(r%distinct)*rb:])
	}
	return &models.Tensor{Name: name, Type: t, Rows: rows, Cols: cols, RowBytes: rb, Data: data}
}

// newDraft8B is a draft of shape c in its drafting form, as the app
// holds one: random weights, Q8_0 copies of the large matrices, their
// float32 values dropped. An EAGLE-3 draft gets Llama 3.1's RoPE
// frequency factors and a reduced vocabulary spread over the target's.
func newDraft8B(b *testing.B, dev device.Device, c draft.Config, m *models.Llama) *Draft {
	d, err := NewDraft(dev, c, m)
	if err != nil {
		b.Fatal(err)
	}
	d.Init(1)
	if c.Kind == draft.EAGLE3 {
		if device.OnHost(dev) {
			// The host scales RoPE by the factors; CUDA has none (nor does
			// the published draft's config need them: no rope_scaling).
			d.RopeFreqs = llama3RopeFreqs(c.RopeTheta, c.HeadDim, 8, 1, 4, 8192)
		}
		d.D2T = make([]int32, c.HeadVocab())
		for i := range d.D2T {
			d.D2T[i] = int32(i * (c.Vocab / c.HeadVocab()))
		}
	}
	if err := d.FreezeForDrafting(); err != nil {
		b.Fatal(err)
	}
	d.DropFloat()
	return d
}

// llama3RopeFreqs is the rope_freqs.weight llama.cpp's converter writes
// for a Llama 3.1 model (rope_scaling type llama3): each pair's frequency
// divisor.
func llama3RopeFreqs(base float32, headDim int, factor, low, high, orig float64) []float32 {
	lowWave, highWave := orig/low, orig/high
	out := make([]float32, headDim/2)
	for i := range out {
		freq := 1 / math.Pow(float64(base), float64(2*i)/float64(headDim))
		wave := 2 * math.Pi / freq
		switch {
		case wave < highWave:
			out[i] = 1
		case wave > lowWave:
			out[i] = float32(factor)
		default:
			smooth := (orig/wave - low) / (high - low)
			out[i] = float32(1 / ((1-smooth)/factor + smooth))
		}
	}
	return out
}

// The factors match llama.cpp's for Llama 3.1 (factor 8, low 1, high 4,
// original context 8192): 1 for the fast pairs, 8 for the slow, a smooth
// ramp between.
func TestLlama3RopeFreqs(t *testing.T) {
	f := llama3RopeFreqs(500000, 128, 8, 1, 4, 8192)
	if len(f) != 64 {
		t.Fatalf("%d factors, want 64", len(f))
	}
	if f[0] != 1 || f[63] != 8 {
		t.Fatalf("factors run from %g to %g, want 1 to 8", f[0], f[63])
	}
	ones, eights := 0, 0
	for i := 1; i < len(f); i++ {
		if f[i] < f[i-1] {
			t.Fatalf("factor %d = %g below factor %d = %g", i, f[i], i-1, f[i-1])
		}
	}
	for _, x := range f {
		switch x {
		case 1:
			ones++
		case 8:
			eights++
		}
	}
	// Wavelengths 2π·500000^(i/64) below 2048 for i ≤ 28, above 8192 for
	// i ≥ 35: six pairs on the ramp.
	if ones != 29 || eights != 29 {
		t.Fatalf("%d factors of 1 and %d of 8, want 29 and 29", ones, eights)
	}
}

// benchRound times one drafting round as the engine runs it at depth and
// top-k: the root's position committed (its top k ranked), then depth
// levels of k nodes, each a child of the level before.
func benchRound(b *testing.B, d *Draft, depth, k int) {
	const ctx = 64
	c := d.C
	rng := rand.New(rand.NewPCG(1, 1))
	s := d.NewSequence(ctx + 1 + depth*k)
	defer s.Free()
	commits := randFeatures(rng, ctx+1, c.FeatureIn())
	toks := make([]int, ctx+1)
	for i := range toks {
		toks[i] = rng.IntN(c.Vocab)
	}
	if _, _, err := s.Forward(commits[:ctx], toks[:ctx]); err != nil {
		b.Fatal(err)
	}
	feats, parents := randFeatures(rng, k, c.Hidden), make([]int, k)
	b.ResetTimer()
	for range b.N {
		if _, _, err := s.ForwardTop(commits[ctx:], toks[ctx:], k, 1); err != nil {
			b.Fatal(err)
		}
		for l := range depth {
			for i := range parents {
				parents[i] = -1
				if l > 0 {
					parents[i] = (l-1)*k + i
				}
			}
			if _, _, err := s.ExtendTop(feats, toks[:k], parents, k, 1); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Truncate(ctx); err != nil {
			b.Fatal(err)
		}
	}
	ms := float64(b.Elapsed().Microseconds()) / float64(b.N) / 1000
	b.ReportMetric(ms, "ms/round")
	b.ReportMetric(ms/float64(depth+1), "ms/step")
}

// randFeatures is n features of width values uniform in ±1.
func randFeatures(rng *rand.Rand, n, width int) [][]float32 {
	out := make([][]float32, n)
	for i := range out {
		out[i] = make([]float32, width)
		for j := range out[i] {
			out[i][j] = float32(2*rng.Float64() - 1)
		}
	}
	return out
}
