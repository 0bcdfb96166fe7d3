package eagle

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"dovetail/models"
	"dovetail/models/draft"
	"dovetail/models/eagle/eagletest"
	"dovetail/models/safetensors"
)

// edit returns an Edit that changes the tensor named name (removing it
// when f returns nil).
func edit(name string, f func(*safetensors.Tensor) *safetensors.Tensor) func([]*safetensors.Tensor) []*safetensors.Tensor {
	return func(ts []*safetensors.Tensor) []*safetensors.Tensor {
		var out []*safetensors.Tensor
		for _, t := range ts {
			if t.Name == name {
				t = f(t)
			}
			if t != nil {
				out = append(out, t)
			}
		}
		return out
	}
}

func add(extra ...*safetensors.Tensor) func([]*safetensors.Tensor) []*safetensors.Tensor {
	return func(ts []*safetensors.Tensor) []*safetensors.Tensor { return append(ts, extra...) }
}

func vector(name string, n int, x float32) *safetensors.Tensor {
	v := make([]float32, n)
	for i := range v {
		v[i] = x
	}
	return eagletest.Float(name, "F32", v, n)
}

// setInt64 sets d2t's entry i.
func setInt64(i int, v int64) func(*safetensors.Tensor) *safetensors.Tensor {
	return func(t *safetensors.Tensor) *safetensors.Tensor {
		vals, _ := t.Int64s()
		vals[i] = v
		return eagletest.Int64s(t.Name, vals)
	}
}

func TestLoadRefuses(t *testing.T) {
	e1, e3 := draft.EAGLE1, draft.EAGLE3
	other := func(f func(*models.Config)) models.Config { c := tiny(); c.Name = "other.gguf"; f(&c); return c }
	cases := []struct {
		name   string
		spec   eagletest.Spec
		target models.Config
		want   string
	}{
		{"hidden", eagletest.Spec{Kind: e1}, other(func(c *models.Config) { c.Hidden = 64 }),
			"(hidden 32, vocabulary 100) does not fit target other.gguf (hidden 64, vocabulary 100)"},
		{"vocabulary", eagletest.Spec{Kind: e3}, other(func(c *models.Config) { c.Vocab = 128 }),
			"(hidden 32, vocabulary 100) does not fit target other.gguf (hidden 32, vocabulary 128)"},
		{"head dimension", eagletest.Spec{Kind: e1}, other(func(c *models.Config) { c.HeadDim = 16 }),
			"(hidden 32, vocabulary 100, head dimension 8) does not fit target other.gguf (hidden 32, vocabulary 100, head dimension 16)"},
		{"aux", eagletest.Spec{Kind: e3, Config: map[string]any{"eagle_config": map[string]any{"eagle_aux_hidden_state_layer_ids": []int{2, 4, 8}}}},
			tiny(), "reads target layers [2 4 8], outside target tiny.gguf's 8 layers (0 to 7)"},
		{"aux count", eagletest.Spec{Kind: e3, Config: map[string]any{"eagle_config": map[string]any{"eagle_aux_hidden_state_layer_ids": []int{2, 4}}}},
			tiny(), "eagle_aux_hidden_state_layer_ids [2 4]: want three layers"},
		{"default aux", eagletest.Spec{Kind: e3}, other(func(c *models.Config) { c.Layers = 2 }),
			"reads target layers [2 1 -1], outside target other.gguf's 2 layers"},
		{"target hidden", eagletest.Spec{Kind: e3, Config: map[string]any{"target_hidden_size": 64}}, tiny(),
			"target_hidden_size 64 differs from hidden_size 32: a draft narrower than its target is not supported"},
		{"rope type", eagletest.Spec{Kind: e1, Config: map[string]any{"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 4}}}, tiny(),
			`rope_scaling type "yarn" is not supported`},
		{"llama3 factors", eagletest.Spec{Kind: e1, Config: map[string]any{"rope_scaling": map[string]any{"rope_type": "llama3", "low_freq_factor": 4, "high_freq_factor": 1}}}, tiny(),
			"want positive values, high above low"},
		{"linear factor", eagletest.Spec{Kind: e1, Config: map[string]any{"rope_scaling": map[string]any{"type": "linear"}}}, tiny(),
			"rope_scaling linear: factor 0"},
		{"eps", eagletest.Spec{Kind: e1, Config: map[string]any{"rms_norm_eps": 0}}, tiny(), "rms_norm_eps 0: want a positive number"},
		{"sizes", eagletest.Spec{Kind: e1, Config: map[string]any{"intermediate_size": nil}}, tiny(), "intermediate_size 0"},
		{"eagle3 layers", eagletest.Spec{Kind: e3, Edit: func(ts []*safetensors.Tensor) []*safetensors.Tensor {
			return append(ts, vector("layers.1.post_attention_layernorm.weight", 32, 1))
		}}, tiny(), "an EAGLE-3 draft has one decoder layer, not 2"},
		{"missing", eagletest.Spec{Kind: e3, Edit: edit("midlayer.mlp.up_proj.weight", func(*safetensors.Tensor) *safetensors.Tensor { return nil })}, tiny(),
			`tensor "layers.0.mlp.up_proj.weight" missing (an EAGLE-3 draft has it)`},
		{"shape", eagletest.Spec{Kind: e1, Edit: edit("layers.0.post_attention_layernorm.weight", func(*safetensors.Tensor) *safetensors.Tensor {
			return vector("layers.0.post_attention_layernorm.weight", 31, 1)
		})}, tiny(), `tensor "layers.0.post_attention_layernorm.weight" has shape [31], want [32]`},
		{"nan", eagletest.Spec{Kind: e3, DType: "BF16", Edit: edit("norm.weight", func(*safetensors.Tensor) *safetensors.Tensor {
			v := vector("norm.weight", 32, 1)
			v.Data = eagletest.Float("norm.weight", "BF16", append(make([]float32, 5), float32(math.NaN()), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), 32).Data
			v.DType = "BF16"
			return v
		})}, tiny(), `tensor "norm.weight" holds NaN at 5`},
		{"inf", eagletest.Spec{Kind: e1, FCBias: true, Edit: edit("fc.bias", func(*safetensors.Tensor) *safetensors.Tensor {
			return vector("fc.bias", 32, float32(math.Inf(1)))
		})}, tiny(), `tensor "fc.bias" holds +Inf at 0`},
		{"unknown", eagletest.Spec{Kind: e1, Edit: add(vector("layers.0.self_attn.q_proj.bias", 32, 0))}, tiny(),
			`tensor "layers.0.self_attn.q_proj.bias" is not part of an EAGLE-1 draft`},
		{"layer 0 norm", eagletest.Spec{Kind: e1, Edit: add(vector("layers.0.input_layernorm.weight", 32, 1))}, tiny(),
			`tensor "layers.0.input_layernorm.weight": this EAGLE-1 draft normalizes fc's output before its first layer`},
		{"twice", eagletest.Spec{Kind: e3, Edit: add(vector("layers.0.hidden_norm.weight", 32, 1))}, tiny(),
			"are the same tensor (layers.0.hidden_norm.weight)"},
		{"no fc", eagletest.Spec{Kind: e1, Edit: edit("fc.weight", func(*safetensors.Tensor) *safetensors.Tensor { return nil })}, tiny(),
			"no fc.weight: not an EAGLE draft"},
		{"fc shape", eagletest.Spec{Kind: e1, Edit: edit("fc.weight", func(*safetensors.Tensor) *safetensors.Tensor {
			return eagletest.Float("fc.weight", "F32", make([]float32, 32*40), 32, 40)
		})}, tiny(), `tensor "fc.weight" has shape [32 40]: want [32 64] (EAGLE-1) or [32 96] (EAGLE-3)`},
		{"eagle3 fc", eagletest.Spec{Kind: e1, Config: map[string]any{"architectures": []string{"Eagle3LlamaForCausalLM"}}}, tiny(),
			"config.json says EAGLE-3, whose fc reads [32 96]"},
		{"d2t outside", eagletest.Spec{Kind: e3, DraftVocab: 10, Edit: edit("d2t", setInt64(3, 200))}, tiny(),
			`tensor "d2t" maps draft token 3 to 203, outside the target's vocabulary of 100`},
		{"d2t negative", eagletest.Spec{Kind: e3, DraftVocab: 10, Edit: edit("d2t", setInt64(0, -1))}, tiny(),
			`tensor "d2t" maps draft token 0 to -1, outside`},
		{"d2t twice", eagletest.Spec{Kind: e3, DraftVocab: 10, Edit: edit("d2t", func(t *safetensors.Tensor) *safetensors.Tensor {
			v, _ := t.Int64s()
			v[4] = v[3] + 3 - 4
			return eagletest.Int64s("d2t", v)
		})}, tiny(), `tensor "d2t" maps draft tokens 3 and 4 both to target token`},
		{"d2t shape", eagletest.Spec{Kind: e3, DraftVocab: 10, Edit: edit("d2t", func(t *safetensors.Tensor) *safetensors.Tensor {
			return eagletest.Int64s("d2t", make([]int64, 9))
		})}, tiny(), `tensor "d2t" has shape [9], want [10]`},
		{"d2t absent", eagletest.Spec{Kind: e3, DraftVocab: 10, Edit: edit("d2t", func(*safetensors.Tensor) *safetensors.Tensor { return nil })}, tiny(),
			`tensor "d2t" missing: the draft's head covers 10 of the target's 100 tokens`},
		{"t2d count", eagletest.Spec{Kind: e3, DraftVocab: 10, Edit: edit("t2d", func(*safetensors.Tensor) *safetensors.Tensor {
			return eagletest.Bools("t2d", make([]bool, 100))
		})}, tiny(), `tensor "t2d" marks 0 tokens, but the draft's head has 10`},
		{"t2d disagrees", eagletest.Spec{Kind: e3, DraftVocab: 10, Edit: func(ts []*safetensors.Tensor) []*safetensors.Tensor {
			d2t := make([]int64, 10) // draft d is target d
			for _, t := range ts {
				if t.Name == "d2t" {
					t.Data = eagletest.Int64s("d2t", d2t).Data
				}
			}
			return ts
		}}, tiny(), `tensor "t2d" does not mark target token`},
		{"eagle1 d2t", eagletest.Spec{Kind: e1, Edit: add(eagletest.Int64s("d2t", make([]int64, 100)))}, tiny(),
			`tensor "d2t": an EAGLE-1 draft has no reduced vocabulary`},
		{"embed shape", eagletest.Spec{Kind: e1, Embed: true, Edit: edit("embed_tokens.weight", func(*safetensors.Tensor) *safetensors.Tensor {
			return eagletest.Float("embed_tokens.weight", "F32", make([]float32, 99*32), 99, 32)
		})}, tiny(), `tensor "embed_tokens.weight" has shape [99 32], want [100 32]`},
		{"embed nan", eagletest.Spec{Kind: e1, Embed: true, Edit: edit("embed_tokens.weight", func(*safetensors.Tensor) *safetensors.Tensor {
			v := make([]float32, 100*32)
			v[70] = float32(math.Inf(-1))
			return eagletest.Float("embed_tokens.weight", "F16", v, 100, 32)
		})}, tiny(), `tensor "embed_tokens.weight" holds a NaN or infinity at 70 (row 2)`},
		{"dtype", eagletest.Spec{Kind: e1, Edit: edit("layers.0.mlp.up_proj.weight", func(*safetensors.Tensor) *safetensors.Tensor {
			return &safetensors.Tensor{Name: "layers.0.mlp.up_proj.weight", DType: "I32", Shape: []int{48, 32}, Data: make([]byte, 48*32*4)}
		})}, tiny(), `tensor "layers.0.mlp.up_proj.weight": dtype I32, want F32, F16 or BF16`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.spec.Target = tiny()
			dir := write(t, c.spec)
			_, err := Load(dir, c.target)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) || strings.Contains(err.Error(), "\n") {
				t.Errorf("got %v\nwant %q naming %s", err, c.want, dir)
			}
		})
	}
}

func TestMismatchLine(t *testing.T) {
	dir := write(t, eagletest.Spec{Kind: draft.EAGLE3})
	tg := tiny()
	tg.Name, tg.Hidden = "llama-3.2-1b.gguf", 2048
	_, err := Load(dir, tg)
	want := "EAGLE draft " + dir + " (hidden 32, vocabulary 100) does not fit target llama-3.2-1b.gguf (hidden 2048, vocabulary 100)"
	if err == nil || err.Error() != want {
		t.Errorf("got %v\nwant %s", err, want)
	}
}

func TestLoadRefusesFiles(t *testing.T) {
	dir := write(t, eagletest.Spec{Kind: draft.EAGLE1})
	os.Remove(filepath.Join(dir, safetensors.SingleFile))
	os.WriteFile(filepath.Join(dir, "pytorch_model.bin"), []byte("PK"), 0o644)
	if _, err := Load(dir, tiny()); err == nil || !strings.Contains(err.Error(), "pytorch_model.bin: not a PyTorch zip checkpoint") {
		t.Errorf("a broken PyTorch checkpoint: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"hidden_size": "big"}`), 0o644)
	if _, err := Load(dir, tiny()); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "config.json")) {
		t.Errorf("config: %v", err)
	}
	if _, err := Load(t.TempDir(), tiny()); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("empty: %v", err)
	}
}
