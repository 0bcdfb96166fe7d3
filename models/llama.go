package models

import (
	"fmt"

	"dovetail/models/gguf"
)

// Llama is a llama-family model (Llama 2/3, Mistral, TinyLlama, Qwen2):
// pre-norm decoder blocks with RoPE attention (GQA) and a SwiGLU MLP.
type Llama struct {
	Config     Config
	File       *gguf.File
	TokenEmbd  *Tensor // Vocab × Hidden
	OutputNorm []float32
	Output     *Tensor // Vocab × Hidden; TokenEmbd when tied
	// RopeFreqs divides the RoPE frequency of each dimension pair (Llama 3.1
	// long-context scaling stores it as rope_freqs.weight); nil when absent.
	RopeFreqs []float32
	Layers    []LlamaLayer
}

// LlamaLayer holds one decoder block's weights. Matrices are out × in.
type LlamaLayer struct {
	AttnNorm            []float32
	Q, K, V, O          *Tensor
	QBias, KBias, VBias []float32 // Qwen2 only
	FFNNorm             []float32
	Gate, Up, Down      *Tensor
}

// LoadLlama opens a GGUF model and binds its weights.
func LoadLlama(path string) (*Llama, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	m, err := BindLlama(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	return m, nil
}

// BindLlama binds the weights of an open file.
func BindLlama(f *gguf.File) (*Llama, error) {
	c, err := ConfigFromGGUF(f)
	if err != nil {
		return nil, err
	}
	b := &binder{f: f}
	kv := c.KVHeads * c.HeadDim
	m := &Llama{Config: c, File: f}
	m.TokenEmbd = b.matrix("token_embd.weight", c.Hidden, c.Vocab)
	m.OutputNorm = b.vector("output_norm.weight", c.Hidden)
	m.Output = m.TokenEmbd
	if !c.TiedOutput {
		m.Output = b.matrix("output.weight", c.Hidden, c.Vocab)
	}
	if b.has("rope_freqs.weight") {
		m.RopeFreqs = b.vector("rope_freqs.weight", c.RopeDim/2)
	}
	m.Layers = make([]LlamaLayer, c.Layers)
	for i := range m.Layers {
		l := &m.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		l.AttnNorm = b.vector(p+"attn_norm.weight", c.Hidden)
		l.Q = b.matrix(p+"attn_q.weight", c.Hidden, c.Hidden)
		l.K = b.matrix(p+"attn_k.weight", c.Hidden, kv)
		l.V = b.matrix(p+"attn_v.weight", c.Hidden, kv)
		l.O = b.matrix(p+"attn_output.weight", c.Hidden, c.Hidden)
		if c.QKVBias {
			l.QBias = b.vector(p+"attn_q.bias", c.Hidden)
			l.KBias = b.vector(p+"attn_k.bias", kv)
			l.VBias = b.vector(p+"attn_v.bias", kv)
		}
		l.FFNNorm = b.vector(p+"ffn_norm.weight", c.Hidden)
		l.Gate = b.matrix(p+"ffn_gate.weight", c.Hidden, c.FFN)
		l.Up = b.matrix(p+"ffn_up.weight", c.Hidden, c.FFN)
		l.Down = b.matrix(p+"ffn_down.weight", c.FFN, c.Hidden)
	}
	if b.err != nil {
		return nil, b.err
	}
	return m, nil
}

// Close releases the mapped file.
func (m *Llama) Close() error { return m.File.Close() }
