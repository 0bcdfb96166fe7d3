// Package eagle reads published EAGLE drafts (EAGLE-1/2 and EAGLE-3, in
// the layouts of the EAGLE repository, SpecForge, vLLM and NVIDIA) from a
// Hugging Face directory: config.json and safetensors weights. It checks
// that a draft fits its target and turns it into Dovetail's draft shapes
// and tensor names (models/draft), Q and K rows permuted into llama.cpp's
// RoPE layout.
package eagle

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"dovetail/models/draft"
	"dovetail/models/safetensors"
)

// Config is what a draft's config.json and its fc tensor say about it.
type Config struct {
	Dir          string
	Arch         string     // config.json's first architecture ("LlamaForCausalLMEagle3")
	Kind         draft.Kind // draft.EAGLE1 (EAGLE-1/2) or draft.EAGLE3
	Hidden       int
	FFN          int
	Heads        int
	KVHeads      int
	HeadDim      int
	Layers       int
	Vocab        int // the target's vocabulary
	DraftVocab   int // EAGLE-3: its head's reduced vocabulary
	RMSEps       float32
	RopeTheta    float32
	Rope         RopeScaling
	MaxPositions int    // 0: not given
	Aux          [3]int // EAGLE-3's target layers, when AuxSet
	AuxSet       bool   // false: chosen from the target's layer count
	FCBias       bool
}

// RopeScaling is config.json's rope_scaling: none (Type ""), "llama3", or
// "linear".
type RopeScaling struct {
	Type            string
	Factor          float64
	LowFreqFactor   float64
	HighFreqFactor  float64
	OriginalContext int
}

// hfConfig is the part of config.json that Dovetail reads.
type hfConfig struct {
	Architectures    []string `json:"architectures"`
	Hidden           int      `json:"hidden_size"`
	FFN              int      `json:"intermediate_size"`
	Heads            int      `json:"num_attention_heads"`
	KVHeads          int      `json:"num_key_value_heads"`
	HeadDim          int      `json:"head_dim"`
	Layers           int      `json:"num_hidden_layers"`
	Vocab            int      `json:"vocab_size"`
	DraftVocab       int      `json:"draft_vocab_size"`
	RMSEps           float64  `json:"rms_norm_eps"`
	RopeTheta        float64  `json:"rope_theta"`
	MaxPositions     int      `json:"max_position_embeddings"`
	TargetHiddenSize int      `json:"target_hidden_size"`
	RopeScaling      *struct {
		RopeType        string  `json:"rope_type"`
		Type            string  `json:"type"`
		Factor          float64 `json:"factor"`
		LowFreqFactor   float64 `json:"low_freq_factor"`
		HighFreqFactor  float64 `json:"high_freq_factor"`
		OriginalContext int     `json:"original_max_position_embeddings"`
	} `json:"rope_scaling"`
	EagleConfig *struct {
		AuxLayers []int `json:"eagle_aux_hidden_state_layer_ids"`
	} `json:"eagle_config"`
}

// ReadConfig reads dir's config.json and the shape of its fc tensor, which
// tells EAGLE-1 (H × 2H) from EAGLE-3 (H × 3H) where the architecture name
// does not.
func ReadConfig(dir string) (Config, error) {
	path := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, err
	}
	c, err := ParseConfig(b)
	if err != nil {
		return Config{}, fmt.Errorf("%s: %w", path, err)
	}
	c.Dir = dir
	if err := c.readFC(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// ParseConfig reads config.json's bytes by ReadConfig's rules, without the
// weights (a pull reads it before it downloads them): Kind is EAGLE3 where
// the architecture names it, else left DGF for the fc tensor to tell. Arch
// is set whenever the JSON reads, even with an error: the caller can tell
// an EAGLE draft it cannot read from a model that is none.
func ParseConfig(b []byte) (Config, error) {
	var h hfConfig
	if err := json.Unmarshal(b, &h); err != nil {
		return Config{}, err
	}
	return h.config("")
}

// LooksLikeDraft reports whether a config describes an EAGLE draft before
// its weights are at hand: an architecture that names EAGLE, or a single
// decoder layer (EAGLE-1/2's releases say LlamaForCausalLM; a model people
// run has many layers).
func (c Config) LooksLikeDraft() bool {
	return strings.Contains(strings.ToLower(c.Arch), "eagle") || c.Layers == 1
}

// config fills in the defaults and checks the values that must be there.
func (h hfConfig) config(dir string) (Config, error) {
	c := Config{Dir: dir, Hidden: h.Hidden, FFN: h.FFN, Heads: h.Heads, KVHeads: h.KVHeads, HeadDim: h.HeadDim,
		Layers: h.Layers, Vocab: h.Vocab, DraftVocab: h.DraftVocab, RMSEps: float32(h.RMSEps),
		RopeTheta: float32(h.RopeTheta), MaxPositions: h.MaxPositions}
	if len(h.Architectures) > 0 {
		c.Arch = h.Architectures[0]
	}
	switch {
	case h.Hidden < 1 || h.Heads < 1 || h.FFN < 1 || h.Layers < 1 || h.Vocab < 1:
		return c, fmt.Errorf("hidden_size %d, intermediate_size %d, num_attention_heads %d, num_hidden_layers %d, vocab_size %d: want all positive",
			h.Hidden, h.FFN, h.Heads, h.Layers, h.Vocab)
	case h.TargetHiddenSize != 0 && h.TargetHiddenSize != h.Hidden:
		return c, fmt.Errorf("target_hidden_size %d differs from hidden_size %d: a draft narrower than its target is not supported",
			h.TargetHiddenSize, h.Hidden)
	case !(h.RMSEps > 0):
		return c, fmt.Errorf("rms_norm_eps %g: want a positive number", h.RMSEps)
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.HeadDim == 0 {
		c.HeadDim = c.Hidden / c.Heads
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000
	}
	if c.DraftVocab == 0 {
		c.DraftVocab = c.Vocab
	}
	if isEagle3(h.Architectures) {
		c.Kind = draft.EAGLE3
	}
	if h.EagleConfig != nil && h.EagleConfig.AuxLayers != nil {
		if len(h.EagleConfig.AuxLayers) != 3 {
			return c, fmt.Errorf("eagle_aux_hidden_state_layer_ids %v: want three layers", h.EagleConfig.AuxLayers)
		}
		copy(c.Aux[:], h.EagleConfig.AuxLayers)
		c.AuxSet = true
	}
	var err error
	if s := h.RopeScaling; s != nil {
		c.Rope, err = ropeScaling(s.RopeType, s.Type, s.Factor, s.LowFreqFactor, s.HighFreqFactor, s.OriginalContext)
	}
	return c, err
}

// isEagle3 reads EAGLE-3 from the architecture names its trainers write
// (LlamaForCausalLMEagle3, Eagle3LlamaForCausalLM, ...).
func isEagle3(archs []string) bool {
	for _, a := range archs {
		if strings.Contains(strings.ToLower(a), "eagle3") {
			return true
		}
	}
	return false
}

// ropeScaling checks rope_scaling; llama.cpp's defaults fill what llama3
// leaves out.
func ropeScaling(ropeType, typ string, factor, low, high float64, orig int) (RopeScaling, error) {
	if ropeType == "" {
		ropeType = typ
	}
	s := RopeScaling{Type: ropeType, Factor: factor, LowFreqFactor: low, HighFreqFactor: high, OriginalContext: orig}
	switch ropeType {
	case "", "default":
		return RopeScaling{}, nil
	case "linear":
		if !(factor > 0) {
			return s, fmt.Errorf("rope_scaling linear: factor %g, want a positive number", factor)
		}
	case "llama3":
		if s.Factor == 0 {
			s.Factor = 8
		}
		if s.LowFreqFactor == 0 {
			s.LowFreqFactor = 1
		}
		if s.HighFreqFactor == 0 {
			s.HighFreqFactor = 4
		}
		if s.OriginalContext == 0 {
			s.OriginalContext = 8192
		}
		if !(s.Factor > 0) || !(s.HighFreqFactor > s.LowFreqFactor) || s.OriginalContext < 1 {
			return s, fmt.Errorf("rope_scaling llama3: factor %g, low_freq_factor %g, high_freq_factor %g, original_max_position_embeddings %d: want positive values, high above low",
				s.Factor, s.LowFreqFactor, s.HighFreqFactor, s.OriginalContext)
		}
	default:
		return s, fmt.Errorf("rope_scaling type %q is not supported (Dovetail reads llama3 and linear)", ropeType)
	}
	return s, nil
}

// readFC reads fc's shape and bias from the weights' header: the kind when
// config.json does not say EAGLE-3.
func (c *Config) readFC() error {
	d, err := openWeights(c.Dir, false)
	if err != nil {
		return err
	}
	defer d.Close()
	names, err := normalize(d.Tensors)
	if err != nil {
		return fmt.Errorf("%s: %w", c.Dir, err)
	}
	fc := names["fc.weight"]
	if fc == nil {
		return fmt.Errorf("%s: no fc.weight: not an EAGLE draft", c.Dir)
	}
	_, c.FCBias = names["fc.bias"]
	H := c.Hidden
	switch {
	case len(fc.Shape) != 2 || fc.Shape[0] != H || (fc.Shape[1] != 2*H && fc.Shape[1] != 3*H):
		return fmt.Errorf("%s: tensor %q has shape %v: want [%d %d] (EAGLE-1) or [%d %d] (EAGLE-3)", fc.File, fc.Name, fc.Shape, H, 2*H, H, 3*H)
	case fc.Shape[1] == 3*H:
		c.Kind = draft.EAGLE3
		// Its decoder layers are the ones the weights hold: some configs
		// copy the target's num_hidden_layers (AvitoTech's avibe-eagle says 36).
		c.Layers = layersIn(names)
	case c.Kind == draft.EAGLE3:
		return fmt.Errorf("%s: tensor %q has shape %v: config.json says EAGLE-3, whose fc reads [%d %d]", fc.File, fc.Name, fc.Shape, H, 3*H)
	default:
		c.Kind = draft.EAGLE1
	}
	return nil
}

// layersIn is the number of decoder layers a checkpoint's (normalized)
// tensors hold: one past the highest "layers.N." they name.
func layersIn(names map[string]*safetensors.Tensor) int {
	n := 0
	for name := range names {
		var l int
		if _, err := fmt.Sscanf(name, "layers.%d.", &l); err == nil && l >= n {
			n = l + 1
		}
	}
	return n
}
