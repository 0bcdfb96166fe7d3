package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"dovetail/cpu/reference"
	"dovetail/internal/golden"
	"dovetail/models"
	"dovetail/models/gguf"
	"dovetail/models/safetensors"
	"dovetail/quant"
)

// qwen2FromSafetensors rebuilds TinyStories-656K as a "qwen2" GGUF from its
// Hugging Face original: Q and K rows unpermuted, so the rotate-half (NEOX)
// RoPE of the qwen2 path is the right one; Q and K biases are zero and every
// V bias value is vBias.
func qwen2FromSafetensors(t *testing.T, vBias float32) *models.Llama {
	t.Helper()
	dir := filepath.Join(golden.Root(), "models", "tinystories656K")
	st, err := safetensors.Read(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	ref, err := gguf.Open(filepath.Join(dir, "tinystories656K-f32.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	w := gguf.NewWriter()
	w.Set("general.architecture", "qwen2")
	for _, kv := range ref.KVs {
		if k, ok := strings.CutPrefix(kv.Key, "llama."); ok {
			w.Set("qwen2."+k, kv.Value)
		} else if kv.Key != "general.architecture" {
			w.Set(kv.Key, kv.Value)
		}
	}
	add := func(name, hf string) {
		src := st.Tensors[hf]
		if src == nil {
			t.Fatalf("safetensors lacks %s", hf)
		}
		dims := make([]uint64, len(src.Shape))
		for i, d := range src.Shape {
			dims[len(dims)-1-i] = uint64(d)
		}
		if err := w.AddTensor(name, quant.F32, dims, src.Data); err != nil {
			t.Fatal(err)
		}
	}
	vec := func(name string, n int, v float32) {
		b := make([]byte, 4*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		w.AddTensor(name, quant.F32, []uint64{uint64(n)}, b)
	}
	add("token_embd.weight", "lm_head.weight")
	add("output_norm.weight", "model.norm.weight")
	for l := 0; l < 2; l++ {
		p, hf := fmt.Sprintf("blk.%d.", l), fmt.Sprintf("model.layers.%d.", l)
		add(p+"attn_norm.weight", hf+"input_layernorm.weight")
		add(p+"attn_q.weight", hf+"self_attn.q_proj.weight")
		add(p+"attn_k.weight", hf+"self_attn.k_proj.weight")
		add(p+"attn_v.weight", hf+"self_attn.v_proj.weight")
		add(p+"attn_output.weight", hf+"self_attn.o_proj.weight")
		add(p+"ffn_norm.weight", hf+"post_attention_layernorm.weight")
		add(p+"ffn_gate.weight", hf+"mlp.gate_proj.weight")
		add(p+"ffn_up.weight", hf+"mlp.up_proj.weight")
		add(p+"ffn_down.weight", hf+"mlp.down_proj.weight")
		vec(p+"attn_q.bias", 128, 0)
		vec(p+"attn_k.bias", 64, 0)
		vec(p+"attn_v.bias", 64, vBias)
	}
	path := filepath.Join(t.TempDir(), "qwen2.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	m, err := models.LoadLlama(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// The qwen2 path (rotate-half RoPE on unpermuted weights, QKV biases)
// reproduces llama.cpp's output for the llama GGUF of the same model.
func TestQwen2PathMatchesGolden(t *testing.T) {
	m := qwen2FromSafetensors(t, 0)
	if m.Config.RopeStyle != models.RopeNeox || !m.Config.QKVBias || !m.Config.TiedOutput {
		t.Fatalf("config %+v", m.Config)
	}
	gc, err := golden.Load(filepath.Join(golden.Root(), "golden", "greedy", "tinystories656K-f32-p2"))
	if err != nil {
		t.Fatal(err)
	}
	pool := NewPool(1)
	defer pool.Close()
	r := reference.New(m, pool.Threads(), 0)
	s := r.NewState()
	logits := make([]float32, m.Config.Vocab)
	for i, tok := range gc.PromptTokens {
		if err := r.Forward(s, tok, logits, nil); err != nil {
			t.Fatal(err)
		}
		if _, rel := golden.Compare(logits, gc.PromptLogits[i]); rel > 1e-3 {
			t.Errorf("position %d: relative error %.2e", i, rel)
		}
	}
	for i, st := range gc.Steps[:16] {
		if got := golden.Argmax(logits); got != st.Token {
			t.Fatalf("step %d: token %d, want %d", i, got, st.Token)
		}
		r.Forward(s, st.Token, logits, nil)
	}

	// The V bias is applied: a constant bias shifts the attention output.
	mb := qwen2FromSafetensors(t, 0.5)
	rb := reference.New(mb, pool.Threads(), 0)
	sb := rb.NewState()
	lb := make([]float32, m.Config.Vocab)
	rb.Forward(sb, gc.PromptTokens[0], lb, nil)
	if _, rel := golden.Compare(lb, gc.PromptLogits[0]); rel < 1e-2 {
		t.Errorf("a V bias of 0.5 changed the logits by only %.2e", rel)
	}
}
