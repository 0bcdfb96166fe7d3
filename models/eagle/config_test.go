package eagle

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"dovetail/models/draft"
	"dovetail/models/eagle/eagletest"
)

func TestReadConfigDefaults(t *testing.T) {
	// An EAGLE-3 draft whose architecture name does not say so: fc's 3H
	// columns do. No KV heads, head_dim or rope_theta: the defaults.
	dir := write(t, eagletest.Spec{Kind: draft.EAGLE3, Config: map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "num_key_value_heads": nil, "head_dim": nil, "rope_theta": nil,
		"draft_vocab_size": nil, "max_position_embeddings": 128,
		"num_attention_heads": 2,
	}})
	c, err := ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != draft.EAGLE3 || c.KVHeads != 2 || c.HeadDim != 16 || c.RopeTheta != 10000 || c.DraftVocab != 100 || c.AuxSet {
		t.Errorf("%+v", c)
	}
	tg := tiny()
	tg.HeadDim = 16
	d, err := c.Draft(tg)
	if err != nil {
		t.Fatal(err)
	}
	if d.Aux != [3]int{2, 4, 5} || d.Context != 128 || d.Blocks != 1 || d.HeadVocab() != 100 {
		t.Errorf("draft %+v", d)
	}
}

func TestReadConfigEagle1(t *testing.T) {
	dir := write(t, eagletest.Spec{Kind: draft.EAGLE1, Layers: 2, FCBias: true, Config: map[string]any{"max_position_embeddings": 4096}})
	c, err := ReadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	d, err := c.Draft(tiny())
	if err != nil {
		t.Fatal(err)
	}
	if d.Kind != draft.EAGLE1 || !d.FCBias || d.Blocks != 2 || d.Context != 256 || d.DraftVocab != 0 || d.FFN != 48 {
		t.Errorf("%+v", d)
	}
}

func TestAuxFromConfig(t *testing.T) {
	dir := write(t, eagletest.Spec{Kind: draft.EAGLE3, Config: map[string]any{
		"eagle_config": map[string]any{"eagle_aux_hidden_state_layer_ids": []int{1, 3, 7}}}})
	ck, err := Load(dir, tiny())
	if err != nil {
		t.Fatal(err)
	}
	if ck.Config.Aux != [3]int{1, 3, 7} {
		t.Errorf("aux %v", ck.Config.Aux)
	}
}

func TestLlama3Freqs(t *testing.T) {
	// Head dimension 8, θ 10000: frequencies 1, 0.1, 0.01, 0.001, wavelengths
	// 2π/f = 6.28, 62.8, 628.3, 6283. Original context 1024, low 1, high 4:
	// under 256 keep (1), over 1024 divide by 8, and 628.3 between:
	// smooth = (1024/628.3185 − 1)/3 = 0.2099157,
	// 1/((1 − smooth)/8 + smooth) = 3.239639.
	c := Config{HeadDim: 8, RopeTheta: 10000, Rope: RopeScaling{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalContext: 1024}}
	want := []float32{1, 1, 3.239639, 8}
	got := c.RopeFreqs()
	for i := range want {
		if len(got) != 4 || math.Abs(float64(got[i]-want[i])) > 1e-5 {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	c.Rope = RopeScaling{Type: "linear", Factor: 2}
	if got := c.RopeFreqs(); !slices.Equal(got, []float32{2, 2, 2, 2}) {
		t.Errorf("linear: %v", got)
	}
	c.Rope = RopeScaling{}
	if got := c.RopeFreqs(); got != nil {
		t.Errorf("none: %v", got)
	}
}

func TestRopeScalingFromConfig(t *testing.T) {
	dir := write(t, eagletest.Spec{Kind: draft.EAGLE1, Config: map[string]any{
		"rope_scaling": map[string]any{"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 1024}}})
	ck, err := Load(dir, tiny())
	if err != nil {
		t.Fatal(err)
	}
	// Low and high freq factors default to 1 and 4 as in llama.cpp.
	if len(ck.RopeFreqs) != 4 || math.Abs(float64(ck.RopeFreqs[2])-3.239639) > 1e-5 {
		t.Errorf("freqs %v", ck.RopeFreqs)
	}
	dir = write(t, eagletest.Spec{Kind: draft.EAGLE1, Config: map[string]any{"rope_scaling": map[string]any{"type": "linear", "factor": 4.0}}})
	if c, err := ReadConfig(dir); err != nil || c.Rope.Type != "linear" || c.RopeFreqs()[0] != 4 {
		t.Errorf("linear: %+v %v", c.Rope, err)
	}
}

func TestIsCheckpoint(t *testing.T) {
	if !IsCheckpoint(write(t, eagletest.Spec{Kind: draft.EAGLE3, Shards: 2})) {
		t.Error("a sharded EAGLE-3 draft is not one")
	}
	if IsCheckpoint("../../testdata/models/tinystories656K") {
		t.Error("a plain Llama directory is one")
	}
	if IsCheckpoint(t.TempDir()) {
		t.Error("an empty directory is one")
	}
	dir := write(t, eagletest.Spec{Kind: draft.EAGLE1})
	os.WriteFile(filepath.Join(dir, "config.json"), []byte("{"), 0o644)
	if IsCheckpoint(dir) {
		t.Error("a broken config.json is one")
	}
}

// ParseConfig reads what a pull sees before the weights: the EAGLE-3
// architecture gives the kind, a plain model's many layers say it is no
// draft, and a draft's config with a value missing still names its
// architecture beside the error.
func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`{"architectures":["LlamaForCausalLMEagle3"],"hidden_size":32,"intermediate_size":48,
		"num_attention_heads":4,"num_hidden_layers":1,"vocab_size":100,"draft_vocab_size":50,"rms_norm_eps":1e-5}`))
	if err != nil || c.Kind != draft.EAGLE3 || c.Arch != "LlamaForCausalLMEagle3" || c.DraftVocab != 50 || c.Dir != "" || !c.LooksLikeDraft() {
		t.Errorf("EAGLE-3: %+v, %v", c, err)
	}
	c, err = ParseConfig([]byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":4096,"intermediate_size":14336,
		"num_attention_heads":32,"num_hidden_layers":32,"vocab_size":128256,"rms_norm_eps":1e-5}`))
	if err != nil || c.Kind != draft.DGF || c.LooksLikeDraft() {
		t.Errorf("a plain model: %+v, %v", c, err)
	}
	c, err = ParseConfig([]byte(`{"architectures":["Eagle3LlamaForCausalLM"],"hidden_size":32}`))
	if err == nil || c.Arch != "Eagle3LlamaForCausalLM" || !c.LooksLikeDraft() {
		t.Errorf("a draft's config without its sizes: %+v, %v", c, err)
	}
	if _, err := ParseConfig([]byte(`{"architectures":`)); err == nil {
		t.Error("broken JSON read")
	}
}

// An EAGLE-3 draft's layer is counted in its weights: a config that copies
// the target's num_hidden_layers (36) still loads as the one layer it holds.
func TestEagle3LayersFromWeights(t *testing.T) {
	dir := write(t, eagletest.Spec{Kind: draft.EAGLE3, Config: map[string]any{"num_hidden_layers": 36}})
	ck, err := Load(dir, tiny())
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if ck.Config.Blocks != 1 {
		t.Fatalf("%d blocks", ck.Config.Blocks)
	}
}
