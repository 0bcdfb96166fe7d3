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
	"dovetail/quant"
)

// qwen2Of rebuilds TinyStories-656K as a "qwen2" GGUF from its llama
// GGUF: Q and K rows unpermuted back to the Hugging Face original's order
// (llama.cpp's converter interleaves each head's two halves for the
// adjacent-pairs RoPE), so that the rotate-half (NEOX) RoPE of the qwen2
// path is the right one; Q and K biases are zero and every V bias value
// is vBias.
func qwen2Of(t *testing.T, vBias float32) *models.Llama {
	t.Helper()
	ref, err := gguf.Open(filepath.Join(golden.Root(), "models", "tinystories656K", "tinystories656K-f32.gguf"))
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
	heads := map[string]int{"attn_q.weight": 8, "attn_k.weight": 4}
	for i := range ref.Tensors {
		ti := &ref.Tensors[i]
		data := ref.TensorData(ti)
		_, kind, _ := strings.Cut(strings.TrimPrefix(ti.Name, "blk."), ".")
		if h := heads[kind]; h > 0 && strings.HasPrefix(ti.Name, "blk.") {
			data = unpermute(data, int(ti.Dims[1]), int(ti.Dims[0]), h)
		}
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, data); err != nil {
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
	for l := 0; l < 2; l++ {
		p := fmt.Sprintf("blk.%d.", l)
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

// unpermute undoes llama.cpp's permutation of a Q or K matrix of f32 rows
// (cols values each), heads heads: row 2i+h of a head holds the original
// row h·d/2+i of that head (d rows a head).
func unpermute(data []byte, rows, cols, heads int) []byte {
	out := make([]byte, len(data))
	d, rb := rows/heads, 4*cols
	for hd := range heads {
		for i := range d / 2 {
			for h := range 2 {
				from, to := hd*d+2*i+h, hd*d+h*d/2+i
				copy(out[to*rb:(to+1)*rb], data[from*rb:(from+1)*rb])
			}
		}
	}
	return out
}

// The qwen2 path (rotate-half RoPE on unpermuted weights, QKV biases)
// reproduces llama.cpp's output for the llama GGUF of the same model.
func TestQwen2PathMatchesGolden(t *testing.T) {
	m := qwen2Of(t, 0)
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
	mb := qwen2Of(t, 0.5)
	rb := reference.New(mb, pool.Threads(), 0)
	sb := rb.NewState()
	lb := make([]float32, m.Config.Vocab)
	rb.Forward(sb, gc.PromptTokens[0], lb, nil)
	if _, rel := golden.Compare(lb, gc.PromptLogits[0]); rel < 1e-2 {
		t.Errorf("a V bias of 0.5 changed the logits by only %.2e", rel)
	}
}
