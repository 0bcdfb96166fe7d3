// Package eagletest writes synthetic EAGLE checkpoints in the published
// layouts (config.json and safetensors, Q and K in Hugging Face's RoPE
// layout) for a target's shape, for tests: random weights from a seed.
package eagletest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"

	"dovetail/internal/atomicfile"
	"dovetail/models"
	"dovetail/models/draft"
	"dovetail/models/safetensors"
	"dovetail/models/torchbin"
	"dovetail/quant"
)

// Spec says what checkpoint to write.
type Spec struct {
	Target     models.Config
	Kind       draft.Kind // draft.EAGLE1 or draft.EAGLE3
	DType      string     // F32 (""), F16 or BF16
	Shards     int        // more than 1: model-0000k-of-0000n.safetensors and the index
	Layers     int        // EAGLE-1's decoder layers (0: 1)
	FFN        int        // 0: the target's
	FCBias     bool       // EAGLE-1
	Embed      bool       // write embed_tokens.weight
	DraftVocab int        // EAGLE-3: fewer than the target's tokens writes d2t and t2d
	Seed       uint64
	// VLLM names the layer "layers.0." and prefixes "model." (vLLM's and
	// NVIDIA's layout) instead of SpecForge's "midlayer.".
	VLLM bool
	// PyTorch writes pytorch_model.bin (torch.save's zip; shards:
	// pytorch_model-0000k-of-0000n.bin and their index), as EAGLE's own
	// releases are published, instead of safetensors.
	PyTorch bool
	// Config is merged into config.json (a nil value removes the key).
	Config map[string]any
	// Edit changes the tensors before they are written.
	Edit func([]*safetensors.Tensor) []*safetensors.Tensor
}

// Write writes the checkpoint into dir (which it creates).
func Write(dir string, s Spec) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ts, err := tensors(s)
	if err != nil {
		return err
	}
	if s.Edit != nil {
		ts = s.Edit(ts)
	}
	if err := writeConfig(dir, s); err != nil {
		return err
	}
	if s.Shards <= 1 {
		if s.PyTorch {
			return torchbin.Write(filepath.Join(dir, torchbin.FileName), ts)
		}
		return safetensors.Write(filepath.Join(dir, safetensors.SingleFile), ts, map[string]string{"format": "pt"})
	}
	return writeShards(dir, ts, s.Shards, s.PyTorch)
}

func (s Spec) layers() int {
	if s.Kind == draft.EAGLE3 || s.Layers == 0 {
		return 1
	}
	return s.Layers
}

func (s Spec) ffn() int {
	if s.FFN > 0 {
		return s.FFN
	}
	return s.Target.FFN
}

func (s Spec) draftVocab() int {
	if s.Kind == draft.EAGLE3 && s.DraftVocab > 0 {
		return s.DraftVocab
	}
	return s.Target.Vocab
}

// writeConfig writes config.json as the trainers do, with s.Config over it.
func writeConfig(dir string, s Spec) error {
	t := s.Target
	c := map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama",
		"hidden_size": t.Hidden, "intermediate_size": s.ffn(), "num_attention_heads": t.Heads,
		"num_key_value_heads": t.KVHeads, "head_dim": t.HeadDim, "num_hidden_layers": s.layers(),
		"vocab_size": t.Vocab, "rms_norm_eps": t.RMSEps, "rope_theta": t.RopeTheta,
		"max_position_embeddings": t.ContextLength, "torch_dtype": "float32",
	}
	if s.Kind == draft.EAGLE3 {
		c["architectures"] = []string{"LlamaForCausalLMEagle3"}
		c["draft_vocab_size"] = s.draftVocab()
	}
	for k, v := range s.Config {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, "config.json"), func(w io.Writer) error { _, err := w.Write(b); return err })
}

// writeShards splits the tensors into n files in order and writes the
// index that names them.
func writeShards(dir string, ts []*safetensors.Tensor, n int, pytorch bool) error {
	weightMap := map[string]string{}
	index, pattern := safetensors.IndexFile, "model-%05d-of-%05d.safetensors"
	if pytorch {
		index, pattern = torchbin.IndexName, "pytorch_model-%05d-of-%05d.bin"
	}
	for k := range n {
		name := fmt.Sprintf(pattern, k+1, n)
		part := ts[k*len(ts)/n : (k+1)*len(ts)/n]
		for _, t := range part {
			weightMap[t.Name] = name
		}
		var err error
		if pytorch {
			err = torchbin.Write(filepath.Join(dir, name), part)
		} else {
			err = safetensors.Write(filepath.Join(dir, name), part, map[string]string{"format": "pt"})
		}
		if err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(map[string]any{"metadata": map[string]any{}, "weight_map": weightMap}, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, index), func(w io.Writer) error { _, err := w.Write(b); return err })
}

// gen makes the random values.
type gen struct {
	rng   *rand.Rand
	dtype string
}

// matrix is N(0, 0.02) values; norm is 1 + N(0, 0.02).
func (g gen) tensor(name string, norm bool, shape ...int) *safetensors.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(g.rng.NormFloat64() * 0.02)
		if norm {
			v[i]++
		}
	}
	return Float(name, g.dtype, v, shape...)
}

// Float encodes v as a tensor of dtype (F32, F16 or BF16; "" is F32).
func Float(name, dtype string, v []float32, shape ...int) *safetensors.Tensor {
	switch dtype {
	case "F16", "BF16":
		b := make([]byte, 2*len(v))
		for i, x := range v {
			h := quant.F32ToF16(x)
			if dtype == "BF16" {
				h = quant.F32ToBF16(x)
			}
			binary.LittleEndian.PutUint16(b[2*i:], h)
		}
		return &safetensors.Tensor{Name: name, DType: dtype, Shape: shape, Data: b}
	}
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return &safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: b}
}

// Int64s encodes v as an I64 tensor.
func Int64s(name string, v []int64) *safetensors.Tensor {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return &safetensors.Tensor{Name: name, DType: "I64", Shape: []int{len(v)}, Data: b}
}

// Bools encodes v as a BOOL tensor.
func Bools(name string, v []bool) *safetensors.Tensor {
	b := make([]byte, len(v))
	for i, x := range v {
		if x {
			b[i] = 1
		}
	}
	return &safetensors.Tensor{Name: name, DType: "BOOL", Shape: []int{len(v)}, Data: b}
}

// tensors lists the checkpoint's tensors under their published names.
func tensors(s Spec) ([]*safetensors.Tensor, error) {
	t := s.Target
	if s.Kind != draft.EAGLE1 && s.Kind != draft.EAGLE3 {
		return nil, fmt.Errorf("eagletest: kind %v is not an EAGLE draft", s.Kind)
	}
	g := gen{rng: rand.New(rand.NewPCG(s.Seed, 43)), dtype: s.DType}
	H, Q, KV, F := t.Hidden, t.Heads*t.HeadDim, t.KVHeads*t.HeadDim, s.ffn()
	top := ""
	if s.VLLM {
		top = "model."
	}
	var ts []*safetensors.Tensor
	if s.Kind == draft.EAGLE3 {
		ts = append(ts, g.tensor(top+"fc.weight", false, H, 3*H))
	} else {
		ts = append(ts, g.tensor(top+"fc.weight", false, H, 2*H))
		if s.FCBias {
			ts = append(ts, g.tensor(top+"fc.bias", false, H))
		}
	}
	for b := range s.layers() {
		p := fmt.Sprintf("%slayers.%d.", top, b)
		in := H
		if s.Kind == draft.EAGLE3 {
			if !s.VLLM {
				p = "midlayer."
			}
			in = 2 * H
			ts = append(ts, g.tensor(p+"hidden_norm.weight", true, H))
		}
		if b > 0 || s.Kind == draft.EAGLE3 {
			ts = append(ts, g.tensor(p+"input_layernorm.weight", true, H))
		}
		ts = append(ts,
			g.tensor(p+"self_attn.q_proj.weight", false, Q, in),
			g.tensor(p+"self_attn.k_proj.weight", false, KV, in),
			g.tensor(p+"self_attn.v_proj.weight", false, KV, in),
			g.tensor(p+"self_attn.o_proj.weight", false, H, Q),
			g.tensor(p+"post_attention_layernorm.weight", true, H),
			g.tensor(p+"mlp.gate_proj.weight", false, F, H),
			g.tensor(p+"mlp.up_proj.weight", false, F, H),
			g.tensor(p+"mlp.down_proj.weight", false, H, F))
	}
	if s.Kind == draft.EAGLE3 {
		ts = append(ts, g.tensor(top+"norm.weight", true, H), g.tensor("lm_head.weight", false, s.draftVocab(), H))
		if s.draftVocab() < t.Vocab {
			ts = append(ts, vocabMaps(g.rng, s.draftVocab(), t.Vocab)...)
		}
	}
	if s.Embed {
		ts = append(ts, g.tensor(top+"embed_tokens.weight", false, t.Vocab, H))
	}
	return ts, nil
}

// vocabMaps picks n of the target's vocab ids, in order, as EAGLE-3's
// reduced vocabulary: d2t holds each one's offset from its draft id, t2d
// marks them.
func vocabMaps(rng *rand.Rand, n, vocab int) []*safetensors.Tensor {
	ids := rng.Perm(vocab)[:n]
	sort.Ints(ids)
	d2t := make([]int64, n)
	t2d := make([]bool, vocab)
	for d, id := range ids {
		d2t[d] = int64(id - d)
		t2d[id] = true
	}
	return []*safetensors.Tensor{Int64s("d2t", d2t), Bools("t2d", t2d)}
}
