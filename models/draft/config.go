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

// Config is the draft's shape. Hidden, Vocab and the attention shape
// follow the target by default; Blocks (M) and FFN are the draft's own.
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
	}
	return nil
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
	attnNorm      = "attn_norm.weight"      // absent in block 0
	ffnNorm       = "ffn_norm.weight"
)

// BlockTensor is the name of a tensor of block b, such as "attn_q.weight".
func BlockTensor(b int, name string) string { return fmt.Sprintf(blockPrefix, b) + name }

// Shapes lists the draft's tensors in checkpoint order.
func (c Config) Shapes() []Shape {
	H := c.Hidden
	s := []Shape{
		{NameEmbedNorm, 1, H, false},
		{NameW1, H, H, true},
		{NameW2, H, H, true},
		{NameWz, H, 2 * H, true},
	}
	for b := range c.Blocks {
		if b > 0 {
			s = append(s, Shape{BlockTensor(b, attnNorm), 1, H, false})
		}
		s = append(s,
			Shape{BlockTensor(b, "attn_q.weight"), c.QDim(), H, true},
			Shape{BlockTensor(b, "attn_k.weight"), c.KVDim(), H, true},
			Shape{BlockTensor(b, "attn_v.weight"), c.KVDim(), H, true},
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
