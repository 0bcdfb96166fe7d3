// Package draft defines the Dovetail draft model's shape and its checkpoint
// format: a GGUF file of architecture "dovetail-draft" that holds the
// draft's own tensors (DGF and M decoder blocks; the target's embeddings
// and LM head are shared, never stored) and a fingerprint of the target
// model it was trained for.
package draft

import (
	"fmt"

	"dovetail/models"
)

// Kind is which draft architecture a Config describes: Dovetail's DGF
// (the zero value), or a published EAGLE draft read from its checkpoint.
type Kind uint8

const (
	DGF    Kind = iota // gated fusion of feature and embedding, M blocks, the target's head
	EAGLE1             // fc over [embedding ‖ feature] with a bias, decoder layers, the target's head
	EAGLE3             // fc over three target layers' states, one layer over [embedding ‖ state], its own head
)

// String names the kind as the command line does (--draft KIND:PATH).
func (k Kind) String() string {
	switch k {
	case EAGLE1:
		return "eagle"
	case EAGLE3:
		return "eagle3"
	}
	return "dgf"
}

// Config is the draft's shape. Hidden, Vocab and the attention shape
// follow the target by default; Blocks (M) and FFN are the draft's own.
// Kind and the fields after it describe EAGLE drafts; a DGF leaves them
// zero.
type Config struct {
	Hidden    int // the target's hidden size: features and embeddings
	Blocks    int // M decoder blocks after the DGF
	Heads     int
	KVHeads   int
	HeadDim   int
	FFN       int // SwiGLU width
	Vocab     int
	Context   int // most positions a sequence holds
	RopeTheta float32
	RMSEps    float32

	Kind       Kind
	DraftVocab int    // EAGLE-3: the rows of its own LM head (a reduced vocabulary; 0: Vocab)
	Aux        [3]int // EAGLE-3: the target layers whose inputs (the residual stream before them) are fused
	FCBias     bool   // EAGLE-1: fc has a bias
}

// ForTarget is the default draft for a target: its attention shape, RoPE
// base and norm epsilon, M blocks, and the target's MLP width when ffn ≤ 0.
func ForTarget(t models.Config, blocks, ffn int) Config {
	if ffn <= 0 {
		ffn = t.FFN
	}
	return Config{Hidden: t.Hidden, Blocks: blocks, Heads: t.Heads, KVHeads: t.KVHeads, HeadDim: t.HeadDim,
		FFN: ffn, Vocab: t.Vocab, Context: t.ContextLength, RopeTheta: t.RopeTheta, RMSEps: t.RMSEps}
}

// MaxBlocks bounds M (the paper's useful range is 1 to 6).
const MaxBlocks = 16

// Validate names the first inconsistent value.
func (c Config) Validate() error {
	switch {
	case c.Hidden < 1 || c.Hidden > 1<<16:
		return fmt.Errorf("draft: hidden size %d out of range", c.Hidden)
	case c.Blocks < 1 || c.Blocks > MaxBlocks:
		return fmt.Errorf("draft: %d blocks, want 1 to %d", c.Blocks, MaxBlocks)
	case c.Heads < 1 || c.KVHeads < 1 || c.Heads%c.KVHeads != 0:
		return fmt.Errorf("draft: %d heads and %d KV heads: heads must be a multiple of KV heads", c.Heads, c.KVHeads)
	case c.HeadDim < 2 || c.HeadDim%2 != 0 || c.HeadDim > 1024:
		return fmt.Errorf("draft: head dimension %d must be even, 2 to 1024", c.HeadDim)
	case c.FFN < 1 || c.FFN > 1<<18:
		return fmt.Errorf("draft: MLP width %d out of range", c.FFN)
	case c.Vocab < 1 || c.Vocab > 1<<24:
		return fmt.Errorf("draft: vocabulary of %d tokens out of range", c.Vocab)
	case c.Context < 2 || c.Context > 1<<24:
		return fmt.Errorf("draft: context %d out of range", c.Context)
	case !(c.RopeTheta > 0) || !(c.RMSEps > 0):
		return fmt.Errorf("draft: RoPE base %g and RMS epsilon %g must be positive", c.RopeTheta, c.RMSEps)
	case c.Kind > EAGLE3:
		return fmt.Errorf("draft: unknown kind %d", c.Kind)
	case c.Kind == EAGLE3 && c.Blocks != 1:
		return fmt.Errorf("draft: an EAGLE-3 draft has one decoder layer, not %d", c.Blocks)
	case c.DraftVocab < 0 || c.DraftVocab > c.Vocab:
		return fmt.Errorf("draft: draft vocabulary of %d tokens, want 1 to the target's %d", c.DraftVocab, c.Vocab)
	case c.Kind == EAGLE3 && (min(c.Aux[0], c.Aux[1], c.Aux[2]) < 0):
		return fmt.Errorf("draft: EAGLE-3 feature layers %v: want layer numbers ≥ 0", c.Aux)
	}
	return nil
}

// FeatureIn is the width of a target feature the draft reads: the final
// hidden state (H), or EAGLE-3's three layers side by side (3H). Features
// the draft predicts itself are always H wide.
func (c Config) FeatureIn() int {
	if c.Kind == EAGLE3 {
		return 3 * c.Hidden
	}
	return c.Hidden
}

// HeadVocab is the number of logits the draft's head computes: EAGLE-3's
// own head covers its reduced vocabulary, mapped to the target's ids.
func (c Config) HeadVocab() int {
	if c.Kind == EAGLE3 && c.DraftVocab > 0 {
		return c.DraftVocab
	}
	return c.Vocab
}

// AttnIn is the width block b's attention projections read: EAGLE-3's
// layer reads [normed embedding ‖ normed state], 2H.
func (c Config) AttnIn(b int) int {
	if c.Kind == EAGLE3 && b == 0 {
		return 2 * c.Hidden
	}
	return c.Hidden
}

// QDim is the width of the queries (and of attention's output).
func (c Config) QDim() int { return c.Heads * c.HeadDim }

// KVDim is the width of keys and values.
func (c Config) KVDim() int { return c.KVHeads * c.HeadDim }

// Shape is one of the draft's own tensors: a Rows × Cols matrix (out × in)
// or a vector (Rows 1). Decay says whether AdamW's weight decay applies
// (matrices, not norm weights).
type Shape struct {
	Name       string
	Rows, Cols int
	Decay      bool
}

// Size is the number of values.
func (s Shape) Size() int { return s.Rows * s.Cols }

// Tensor names. The DGF follows the released Dovetail code: W1 maps the
// feature, W2 the normalized embedding, Wz gates [h1 ‖ h2].
const (
	NameW1        = "dgf.fc_feature.weight" // H × H
	NameW2        = "dgf.fc_embed.weight"   // H × H
	NameEmbedNorm = "dgf.embed_norm.weight" // H
	NameWz        = "dgf.gate.weight"       // H × 2H
	blockPrefix   = "blk.%d."               // llama.cpp's block names follow

	// EAGLE's own tensors (its decoder layers use the block names; the
	// loader permutes their Q and K rows into llama.cpp's RoPE layout).
	NameFC         = "eagle.fc.weight"          // H × 2H (EAGLE-1: [embedding ‖ feature]) or H × 3H (EAGLE-3)
	NameFCBias     = "eagle.fc.bias"            // H (EAGLE-1)
	NameHiddenNorm = "eagle.hidden_norm.weight" // H (EAGLE-3: the state's norm)
	NameInputNorm  = "eagle.input_norm.weight"  // H (EAGLE-3: the embedding's norm, HF's input_layernorm)
	NameOutputNorm = "output_norm.weight"       // H (EAGLE-3)
	NameOutput     = "output.weight"            // DraftVocab × H (EAGLE-3)
	attnNorm       = "attn_norm.weight"         // absent in block 0
	ffnNorm        = "ffn_norm.weight"
)

// BlockTensor is the name of a tensor of block b, such as "attn_q.weight".
func BlockTensor(b int, name string) string { return fmt.Sprintf(blockPrefix, b) + name }

// Shapes lists the draft's tensors in checkpoint order.
func (c Config) Shapes() []Shape {
	H := c.Hidden
	var s []Shape
	switch c.Kind {
	case EAGLE1:
		s = append(s, Shape{NameFC, H, 2 * H, true})
		if c.FCBias {
			s = append(s, Shape{NameFCBias, 1, H, false})
		}
	case EAGLE3:
		s = append(s, Shape{NameFC, H, 3 * H, true}, Shape{NameHiddenNorm, 1, H, false}, Shape{NameInputNorm, 1, H, false})
	default:
		s = append(s, Shape{NameEmbedNorm, 1, H, false}, Shape{NameW1, H, H, true},
			Shape{NameW2, H, H, true}, Shape{NameWz, H, 2 * H, true})
	}
	s = append(s, c.blockShapes()...)
	if c.Kind == EAGLE3 {
		s = append(s, Shape{NameOutputNorm, 1, H, false}, Shape{NameOutput, c.HeadVocab(), H, true})
	}
	return s
}

// blockShapes lists the decoder blocks' tensors; block 0 has no attention
// norm (it reads the fusion's output as it is).
func (c Config) blockShapes() []Shape {
	H := c.Hidden
	var s []Shape
	for b := range c.Blocks {
		in := c.AttnIn(b)
		if b > 0 {
			s = append(s, Shape{BlockTensor(b, attnNorm), 1, H, false})
		}
		s = append(s,
			Shape{BlockTensor(b, "attn_q.weight"), c.QDim(), in, true},
			Shape{BlockTensor(b, "attn_k.weight"), c.KVDim(), in, true},
			Shape{BlockTensor(b, "attn_v.weight"), c.KVDim(), in, true},
			Shape{BlockTensor(b, "attn_output.weight"), H, c.QDim(), true},
			Shape{BlockTensor(b, ffnNorm), 1, H, false},
			Shape{BlockTensor(b, "ffn_gate.weight"), c.FFN, H, true},
			Shape{BlockTensor(b, "ffn_up.weight"), c.FFN, H, true},
			Shape{BlockTensor(b, "ffn_down.weight"), H, c.FFN, true},
		)
	}
	return s
}

// Params is the number of trainable values.
func (c Config) Params() int {
	n := 0
	for _, s := range c.Shapes() {
		n += s.Size()
	}
	return n
}
