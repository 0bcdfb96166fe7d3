// Package models says what a model is: its architecture configuration read
// from GGUF metadata, its weights bound by name, and (in sub-packages) the
// file formats and tokenizers it comes with.
package models

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"dovetail/models/gguf"
)

// RopeStyle is how RoPE pairs the dimensions of a head.
type RopeStyle int

const (
	// RopeNorm rotates adjacent pairs (x[2i], x[2i+1]): llama.cpp's layout,
	// for which the GGUF converter permutes the Q and K rows of Llama models.
	RopeNorm RopeStyle = iota
	// RopeNeox rotates (x[i], x[i+d/2]): the Hugging Face rotate-half layout
	// that Qwen2's GGUF files keep.
	RopeNeox
)

// Config is the shape and hyper-parameters of a llama-family transformer.
type Config struct {
	Arch          string // GGUF general.architecture
	Name          string
	Hidden        int // embedding length
	Layers        int
	Heads         int
	KVHeads       int
	HeadDim       int
	FFN           int // MLP width
	Vocab         int
	ContextLength int
	RMSEps        float32
	RopeTheta     float32
	RopeDim       int // dimensions of each head that RoPE rotates
	RopeStyle     RopeStyle
	RopeScale     float32 // linear position scaling (1 when none)
	QKVBias       bool
	TiedOutput    bool // the output matrix is the token embedding
}

// arch describes what one architecture family adds to the common keys.
type arch struct {
	ropeStyle RopeStyle
	qkvBias   bool
}

var archs = map[string]arch{
	"llama":   {ropeStyle: RopeNorm},
	"mistral": {ropeStyle: RopeNorm},
	"qwen2":   {ropeStyle: RopeNeox, qkvBias: true},
}

// SupportedArchs lists the architectures Dovetail runs.
func SupportedArchs() []string {
	var s []string
	for a := range archs {
		s = append(s, a)
	}
	sort.Strings(s)
	return s
}

// ConfigFromGGUF reads the configuration from a GGUF file's metadata.
func ConfigFromGGUF(f *gguf.File) (Config, error) {
	var c Config
	name, ok := f.String("general.architecture")
	if !ok {
		return c, fmt.Errorf("%s: general.architecture missing: not a model file (a vocabulary-only GGUF?)", f.Path)
	}
	a, ok := archs[name]
	if !ok {
		return c, fmt.Errorf("%s: architecture %q is not supported (supported: %s)", f.Path, name, strings.Join(SupportedArchs(), ", "))
	}
	c.Arch, c.RopeStyle, c.QKVBias = name, a.ropeStyle, a.qkvBias
	c.Name, _ = f.String("general.name")
	key := func(k string) string { return name + "." + k }
	req := func(k string, dst *int) error {
		v, ok := f.Uint(key(k))
		if !ok || v == 0 || v > 1<<24 {
			return fmt.Errorf("%s: metadata %s missing or invalid", f.Path, key(k))
		}
		*dst = int(v)
		return nil
	}
	for _, r := range []struct {
		k   string
		dst *int
	}{
		{"embedding_length", &c.Hidden},
		{"block_count", &c.Layers},
		{"attention.head_count", &c.Heads},
		{"feed_forward_length", &c.FFN},
		{"context_length", &c.ContextLength},
	} {
		if err := req(r.k, r.dst); err != nil {
			return c, err
		}
	}
	c.KVHeads = c.Heads
	if v, ok := f.Uint(key("attention.head_count_kv")); ok {
		c.KVHeads = int(v)
	}
	if c.KVHeads == 0 || c.Heads%c.KVHeads != 0 {
		return c, fmt.Errorf("%s: %d attention heads cannot share %d KV heads", f.Path, c.Heads, c.KVHeads)
	}
	if c.Hidden%c.Heads != 0 {
		return c, fmt.Errorf("%s: embedding length %d is not a multiple of %d heads", f.Path, c.Hidden, c.Heads)
	}
	c.HeadDim = c.Hidden / c.Heads
	if v, ok := f.Uint(key("attention.key_length")); ok && int(v) != c.HeadDim {
		return c, fmt.Errorf("%s: %s = %d differs from embedding/heads = %d, which is not supported", f.Path, key("attention.key_length"), v, c.HeadDim)
	}
	c.RopeDim = c.HeadDim
	if v, ok := f.Uint(key("rope.dimension_count")); ok {
		c.RopeDim = int(v)
	}
	if c.RopeDim <= 0 || c.RopeDim > c.HeadDim || c.RopeDim%2 != 0 {
		return c, fmt.Errorf("%s: %s = %d must be even and at most the head size %d", f.Path, key("rope.dimension_count"), c.RopeDim, c.HeadDim)
	}
	c.RMSEps = 1e-5
	if v, ok := f.Float(key("attention.layer_norm_rms_epsilon")); ok {
		c.RMSEps = float32(v)
	}
	c.RopeTheta = 10000
	if v, ok := f.Float(key("rope.freq_base")); ok {
		c.RopeTheta = float32(v)
	}
	c.RopeScale = 1
	if typ, ok := f.String(key("rope.scaling.type")); ok && typ != "none" {
		if typ != "linear" {
			return c, fmt.Errorf("%s: RoPE scaling %q is not supported (supported: none, linear)", f.Path, typ)
		}
		if v, ok := f.Float(key("rope.scaling.factor")); ok && v > 0 {
			c.RopeScale = float32(v)
		}
	}
	if !(c.RMSEps > 0) || !(c.RopeTheta > 0) || math.IsInf(float64(c.RopeTheta), 0) {
		return c, fmt.Errorf("%s: invalid RMS epsilon %v or RoPE base %v", f.Path, c.RMSEps, c.RopeTheta)
	}
	if toks, ok := f.Strings("tokenizer.ggml.tokens"); ok {
		c.Vocab = len(toks)
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || len(emb.Dims) != 2 {
		return c, fmt.Errorf("%s: tensor token_embd.weight missing or not 2-D", f.Path)
	}
	if c.Vocab == 0 {
		c.Vocab = int(emb.Dims[1])
	}
	_, hasOutput := f.Tensor("output.weight")
	c.TiedOutput = !hasOutput
	return c, nil
}

// Params counts the parameters of the model's tensors.
func Params(f *gguf.File) uint64 {
	var n uint64
	for i := range f.Tensors {
		n += f.Tensors[i].Elements()
	}
	return n
}
