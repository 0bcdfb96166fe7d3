package quant

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"testing"
)

// goldenInput is a deterministic row mixing real weights (the f32
// tinystories656K token embedding, each 256-value block rescaled by a power
// of ten from 1e-3 to 1e3) with synthetic blocks for the corner cases: zeros,
// constants, ramps, spikes, alternating signs, and values so small that the
// scales become f16 subnormals.
func goldenInput(t *testing.T) []float32 {
	ts, err := readGGUF(modelPath("tinystories656K", "tinystories656K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	emb := ts["token_embd.weight"]
	x := make([]float32, emb.n())
	if err := DequantizeRow(F32, x, emb.data); err != nil {
		t.Fatal(err)
	}
	for i := range x {
		x[i] *= float32(math.Pow(10, float64(i/QKK%7-3)))
	}
	for k := range 32 {
		blk := make([]float32, QKK)
		for i := range blk {
			s := math.Sin(float64(i*(k+1)) * 0.37)
			switch k % 8 {
			case 0: // zeros
			case 1:
				blk[i] = float32(k) - 16
			case 2:
				blk[i] = float32(i-128) / 64
			case 3:
				if i == 7*k%QKK {
					blk[i] = 1000
				} else {
					blk[i] = float32(s) * 1e-2
				}
			case 4:
				blk[i] = float32(1 - 2*(i&1))
			case 5:
				blk[i] = float32(s) * 1e-6
			case 6:
				blk[i] = float32(math.Abs(s)) * 3
			default:
				blk[i] = float32(s*s*s) * float32(k)
			}
		}
		x = append(x, blk...)
	}
	return x
}

// TestGolden pins QuantizeRow's output to ggml's reference quantizers,
// byte for byte, through SHA-256 digests of ggml's own output for
// goldenInput. They were produced once by ggml's quantize_row_*_ref compiled
// with -ffp-contract=off: ggml's results depend on whether the C compiler
// fuses multiply-adds (with -march=native it does, and Q4_0, Q5_0, Q4_K and
// Q6_K bytes change), and this package follows the unfused arithmetic, which
// is also what produced the Q8_0 and Q4_0 test models.
func TestGolden(t *testing.T) {
	x := goldenInput(t)
	for _, c := range []struct {
		typ    Type
		digest string
	}{
		{Q4_0, "0ce81331c62146239560c9c8219435413c384c37c1ecfcbc774aec0f974ba58b"},
		{Q4_1, "df823e8b1b61bb9205eae64dd8c240b1273aa32547a6e95aaa8513ae51b76ed0"},
		{Q5_0, "97481218b6d1ad7fe0ecd387ace18724ef4da1bc470f176cf01a29375029f3cb"},
		{Q5_1, "e35de1926a658342582ff2990086e7a85fd102e6579623fea2024880ce716b2d"},
		{Q8_0, "e41b60f8efb15932c0172cbe177f1e82c1d32184cd497454aa52f962a9803278"},
		{Q8_1, "45cbc843aa884d8cf6216d7688a6d142c0e36ab5deaf8aea8e23a2c432db7fe5"},
		{Q2_K, "33f44cdea15cc572baca3a716ad9d2e0639898e5dc5114a2b851c746c84cd393"},
		{Q3_K, "cc66d10fbc0097e87704144c675b17e7bcd82e3be9257290fd8e02c4a58b184a"},
		{Q4_K, "5852f42da5c7432d443caa4bac0594df029499f6dd7e08978534d924c1cebedf"},
		{Q5_K, "3b0065372c414f612153228ad6095d9b6f1de515ecad93bb1e0e1babbd05d80e"},
		{Q6_K, "d116fc7f8f8b4a9ea370303f452bb9045e22d55ea1703cc816984930ab188f24"},
		{Q8_K, "d88189404261fc921bc5b69ba72a037b9feb82ebbbd431c3758d22bb995494bc"},
		{IQ4_NL, "edce878f6d1fb19732ab933664447f23ae06da11125f9c32a8ae8330328741d1"},
		{IQ4_XS, "75c86c03e325dab1595ee51e75d42b64e6e6855862fe2393473b8f564b16ce15"},
	} {
		sum := sha256.Sum256(quantize(t, c.typ, x))
		if got := hex.EncodeToString(sum[:]); got != c.digest {
			t.Errorf("%v: SHA-256 of QuantizeRow output %s, ggml's is %s", c.typ, got, c.digest)
		}
	}
}

// TestDequantizeIQGolden pins the 1-, 2- and 3-bit i-quants' dequantization to
// ggml's dequantize_row_* through SHA-256 digests of ggml's own float
// output for the same random blocks (8 super-blocks of each, PCG(41, 42),
// made in this order by randomRow), ggml built with -ffp-contract=off.
func TestDequantizeIQGolden(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, c := range []struct {
		typ    Type
		digest string
	}{
		{IQ2_XXS, "01e84bc95bf15389aa0e1941b104e53bb34542111d338be91ab3e6bb74d0e4d8"},
		{IQ2_XS, "cf2001d59d49079da64b93c6b7f9090237c1b2f3209c6c27043e1a131441af6b"},
		{IQ2_S, "c8fab2689cd9e5cc8bd645e191b32338243a4f7c5d39e218c686b9230a9074c1"},
		{IQ3_XXS, "4ee0de5e87706b549611a73efd9f2d77df384c1bc624c3c6033b4e458eadc3d9"},
		{IQ3_S, "f49db1f21a95430191ceae6fdf4de36a886796963337409898f309fefacf87df"},
		// ggml's libggml-base of the llama.cpp peer build (after ggml_init,
		// which fills its f16 table); no sum in their arithmetic to contract.
		{IQ1_S, "70bfb607cf275416fba54a95f85c43dfa16d2680120daf5b8fe0b2cf0df307ac"},
		{IQ1_M, "8b5b23666080e602d601ad78a2835be125c5aa31f3a04d8efa429fcbc33b4511"},
	} {
		y := dequant(t, c.typ, randomRow(r, c.typ, 8*QKK), 8*QKK)
		b := make([]byte, 4*len(y))
		for i, v := range y {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != c.digest {
			t.Errorf("%v: SHA-256 of the dequantized values %s, ggml's is %s", c.typ, got, c.digest)
		}
	}
}
