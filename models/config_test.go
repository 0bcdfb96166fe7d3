package models

import (
	"bytes"
	"strings"
	"testing"

	"dovetail/models/gguf"
	"dovetail/quant"
)

// synth writes a tiny model of architecture arch with the given extra
// metadata and parses it back.
func synth(t *testing.T, arch string, extra map[string]any, withOutput bool) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	w.Set("general.architecture", arch)
	for k, v := range map[string]any{
		"embedding_length": uint32(64), "block_count": uint32(1), "attention.head_count": uint32(4),
		"attention.head_count_kv": uint32(2), "feed_forward_length": uint32(96), "context_length": uint32(256),
	} {
		w.Set(arch+"."+k, v)
	}
	for k, v := range extra {
		w.Set(k, v)
	}
	mat := func(name string, cols, rows int) {
		if err := w.AddTensor(name, quant.F32, []uint64{uint64(cols), uint64(rows)}, make([]byte, 4*cols*rows)); err != nil {
			t.Fatal(err)
		}
	}
	vec := func(name string, n int) { w.AddTensor(name, quant.F32, []uint64{uint64(n)}, make([]byte, 4*n)) }
	mat("token_embd.weight", 64, 100)
	vec("output_norm.weight", 64)
	if withOutput {
		mat("output.weight", 64, 100)
	}
	vec("blk.0.attn_norm.weight", 64)
	mat("blk.0.attn_q.weight", 64, 64)
	mat("blk.0.attn_k.weight", 64, 32)
	mat("blk.0.attn_v.weight", 64, 32)
	mat("blk.0.attn_output.weight", 64, 64)
	vec("blk.0.ffn_norm.weight", 64)
	mat("blk.0.ffn_gate.weight", 64, 96)
	mat("blk.0.ffn_up.weight", 64, 96)
	mat("blk.0.ffn_down.weight", 96, 64)
	if arch == "qwen2" {
		vec("blk.0.attn_q.bias", 64)
		vec("blk.0.attn_k.bias", 32)
		vec("blk.0.attn_v.bias", 32)
	}
	if _, ok := extra["with rope_freqs"]; ok {
		vec("rope_freqs.weight", 8)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(arch+".gguf", buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestConfigs(t *testing.T) {
	m, err := BindLlama(synth(t, "llama", nil, true))
	if err != nil {
		t.Fatal(err)
	}
	c := m.Config
	if c.HeadDim != 16 || c.KVHeads != 2 || c.RopeDim != 16 || c.RopeTheta != 10000 || c.RMSEps != 1e-5 ||
		c.Vocab != 100 || c.TiedOutput || c.RopeStyle != RopeNorm || c.QKVBias || c.RopeScale != 1 {
		t.Errorf("llama defaults: %+v", c)
	}
	m, err = BindLlama(synth(t, "qwen2", map[string]any{"qwen2.rope.freq_base": float32(1e6)}, false))
	if err != nil {
		t.Fatal(err)
	}
	c = m.Config
	if !c.TiedOutput || c.RopeStyle != RopeNeox || !c.QKVBias || c.RopeTheta != 1e6 || m.Output != m.TokenEmbd {
		t.Errorf("qwen2: %+v", c)
	}
	m, err = BindLlama(synth(t, "llama", map[string]any{"with rope_freqs": true,
		"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": float32(4)}, true))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.RopeFreqs) != 8 || m.Config.RopeScale != 4 {
		t.Errorf("llama3 rope: freqs %d, scale %v", len(m.RopeFreqs), m.Config.RopeScale)
	}
	if _, err := BindLlama(synth(t, "mistral", nil, true)); err != nil {
		t.Errorf("mistral: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	cases := []struct {
		f    *gguf.File
		want string
	}{
		{synth(t, "gpt2", nil, true), `architecture "gpt2" is not supported (supported: llama, mistral, qwen2)`},
		{synth(t, "llama", map[string]any{"llama.rope.scaling.type": "yarn"}, true), `RoPE scaling "yarn"`},
		{synth(t, "llama", map[string]any{"llama.attention.head_count_kv": uint32(3)}, true), "4 attention heads cannot share 3 KV heads"},
		{synth(t, "llama", map[string]any{"llama.block_count": uint32(2)}, true), "blk.1.attn_norm.weight missing"},
		{synth(t, "llama", map[string]any{"llama.feed_forward_length": uint32(100)}, true), "has shape [64 96], want [64 100]"},
	}
	for _, c := range cases {
		_, err := BindLlama(c.f)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want %q", err, c.want)
		}
	}
}
