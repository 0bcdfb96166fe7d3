package eagle

import (
	"fmt"
	"strings"

	"dovetail/models/draft"
	"dovetail/models/safetensors"
)

// normalize names a checkpoint's tensors as the EAGLE repository and
// SpecForge do: NVIDIA's and vLLM's "model." prefix dropped, EAGLE-3's
// "midlayer." read as "layers.0.". Rotary tables that old checkpoints
// carry are computed, not read, and are left out.
func normalize(ts map[string]*safetensors.Tensor) (map[string]*safetensors.Tensor, error) {
	out := make(map[string]*safetensors.Tensor, len(ts))
	for name, t := range ts {
		if strings.HasSuffix(name, "rotary_emb.inv_freq") {
			continue
		}
		n := strings.TrimPrefix(name, "model.")
		if rest, ok := strings.CutPrefix(n, "midlayer."); ok {
			n = "layers.0." + rest
		}
		if prev, ok := out[n]; ok {
			return nil, fmt.Errorf("tensors %q and %q are the same tensor (%s)", prev.Name, t.Name, n)
		}
		out[n] = t
	}
	return out, nil
}

// blockNames maps llama.cpp's block tensor names to Hugging Face's.
var blockNames = map[string]string{
	"attn_norm.weight":   "input_layernorm.weight",
	"attn_q.weight":      "self_attn.q_proj.weight",
	"attn_k.weight":      "self_attn.k_proj.weight",
	"attn_v.weight":      "self_attn.v_proj.weight",
	"attn_output.weight": "self_attn.o_proj.weight",
	"ffn_norm.weight":    "post_attention_layernorm.weight",
	"ffn_gate.weight":    "mlp.gate_proj.weight",
	"ffn_up.weight":      "mlp.up_proj.weight",
	"ffn_down.weight":    "mlp.down_proj.weight",
}

// topNames maps EAGLE's own tensors to their normalized checkpoint names.
var topNames = map[string]string{
	draft.NameFC:         "fc.weight",
	draft.NameFCBias:     "fc.bias",
	draft.NameHiddenNorm: "layers.0.hidden_norm.weight",
	draft.NameInputNorm:  "layers.0.input_layernorm.weight",
	draft.NameOutputNorm: "norm.weight",
	draft.NameOutput:     "lm_head.weight",
}

// Names of the tensors that are not the draft's layers.
const (
	embedName = "embed_tokens.weight"
	d2tName   = "d2t"
	t2dName   = "t2d"
)

// hfName is the normalized checkpoint name of a Dovetail tensor name.
func hfName(name string) string {
	if n, ok := topNames[name]; ok {
		return n
	}
	var b int
	var rest string
	if _, err := fmt.Sscanf(name, "blk.%d.%s", &b, &rest); err == nil {
		if n, ok := blockNames[rest]; ok {
			return fmt.Sprintf("layers.%d.%s", b, n)
		}
	}
	return name
}
