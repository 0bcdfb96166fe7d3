package eagle

import (
	"fmt"
	"path/filepath"
	"slices"

	"dovetail/models"
	"dovetail/models/draft"
	"dovetail/models/safetensors"
	"dovetail/quant"
)

// Checkpoint is a published EAGLE draft read for a target.
type Checkpoint struct {
	Dir     string
	Config  draft.Config
	Tensors map[string][]float32 // Dovetail's names (draft.Config.Shapes), Q and K in llama.cpp's RoPE layout
	// Embed is the checkpoint's own embed_tokens (Vocab × H, F32, F16 or
	// BF16), a slice of the mapped file until Close; nil when it has none
	// and the target's are used.
	Embed *models.Tensor
	// D2T maps EAGLE-3's draft ids to target ids (d + d2t[d] in the
	// checkpoint); nil is the identity.
	D2T []int32
	// RopeFreqs divides each RoPE frequency pair (like GGUF's rope_freqs);
	// nil when the draft has no scaling.
	RopeFreqs []float32
	Name      string // the directory's name

	files *safetensors.Dir // open while Embed points into it
}

// Close releases the mapped files Embed points into.
func (c *Checkpoint) Close() error {
	if c.files == nil {
		return nil
	}
	err := c.files.Close()
	c.files, c.Embed = nil, nil
	return err
}

// Load reads the EAGLE draft in dir for target: its config, checked
// against the target, and its tensors, each checked for shape and finite
// values. Errors are one line naming the tensor.
func Load(dir string, target models.Config) (*Checkpoint, error) {
	cfg, err := ReadConfig(dir)
	if err != nil {
		return nil, err
	}
	dc, err := cfg.Draft(target)
	if err != nil {
		return nil, err
	}
	files, err := openWeights(dir, true)
	if err != nil {
		return nil, err
	}
	ck := &Checkpoint{Dir: dir, Config: dc, RopeFreqs: cfg.RopeFreqs(), Name: filepath.Base(filepath.Clean(dir)), files: files}
	if err := ck.read(files.Tensors); err != nil {
		files.Close()
		return nil, err
	}
	if ck.Embed == nil {
		ck.Close()
	}
	return ck, nil
}

// read binds every tensor of the checkpoint, refusing any it does not know.
func (ck *Checkpoint) read(ts map[string]*safetensors.Tensor) error {
	names, err := normalize(ts)
	if err != nil {
		return fmt.Errorf("%s: %w", ck.Dir, err)
	}
	used := map[string]bool{}
	take := func(n string) *safetensors.Tensor { used[n] = true; return names[n] }
	if ck.Tensors, err = ck.layers(names, take); err != nil {
		return err
	}
	if t := take(embedName); t != nil {
		if ck.Embed, err = embedding(t, ck.Config); err != nil {
			return err
		}
	}
	if ck.D2T, err = vocabMap(take(d2tName), take(t2dName), ck.Config, ck.Dir); err != nil {
		return err
	}
	for n, t := range names {
		if !used[n] {
			return fmt.Errorf("%s: tensor %q is not part of an %s draft (Dovetail does not know it)", t.File, t.Name, kindName(ck.Config.Kind))
		}
	}
	return nil
}

func kindName(k draft.Kind) string {
	if k == draft.EAGLE3 {
		return "EAGLE-3"
	}
	return "EAGLE-1"
}

// layers reads the tensors draft.Config.Shapes lists, in Dovetail's names.
func (ck *Checkpoint) layers(names map[string]*safetensors.Tensor, take func(string) *safetensors.Tensor) (map[string][]float32, error) {
	c := ck.Config
	if c.Kind == draft.EAGLE1 {
		if t := take(hfName(draft.BlockTensor(0, "attn_norm.weight"))); t != nil {
			return nil, fmt.Errorf("%s: tensor %q: this EAGLE-1 draft normalizes fc's output before its first layer, which Dovetail's EAGLE-1 does not",
				t.File, t.Name)
		}
	}
	out := map[string][]float32{}
	for _, s := range c.Shapes() {
		t := take(hfName(s.Name))
		if t == nil {
			return nil, fmt.Errorf("%s: tensor %q missing (an %s draft has it)", ck.Dir, hfName(s.Name), kindName(c.Kind))
		}
		v, err := values(t, s)
		if err != nil {
			return nil, err
		}
		out[s.Name] = v
	}
	for b := range c.Blocks {
		q, k := draft.BlockTensor(b, "attn_q.weight"), draft.BlockTensor(b, "attn_k.weight")
		out[q] = permuteRoPE(out[q], c.QDim(), c.AttnIn(b), c.Heads)
		out[k] = permuteRoPE(out[k], c.KVDim(), c.AttnIn(b), c.KVHeads)
	}
	return out, nil
}

// values checks a tensor's shape (vectors are 1-D) and values and converts
// it.
func values(t *safetensors.Tensor, s draft.Shape) ([]float32, error) {
	want := []int{s.Rows, s.Cols}
	if s.Rows == 1 && !s.Decay {
		want = want[1:]
	}
	if !slices.Equal(t.Shape, want) {
		return nil, fmt.Errorf("%s: tensor %q has shape %v, want %v", t.File, t.Name, t.Shape, want)
	}
	v, err := t.Float32()
	if err != nil {
		return nil, err
	}
	if i := t.NonFinite(); i >= 0 {
		return nil, fmt.Errorf("%s: tensor %q holds %v at %d", t.File, t.Name, v[i], i)
	}
	return v, nil
}

// embedding binds the checkpoint's own token embeddings in place.
func embedding(t *safetensors.Tensor, c draft.Config) (*models.Tensor, error) {
	if !slices.Equal(t.Shape, []int{c.Vocab, c.Hidden}) {
		return nil, fmt.Errorf("%s: tensor %q has shape %v, want [%d %d]", t.File, t.Name, t.Shape, c.Vocab, c.Hidden)
	}
	typ, ok := map[string]quant.Type{"F32": quant.F32, "F16": quant.F16, "BF16": quant.BF16}[t.DType]
	if !ok {
		return nil, fmt.Errorf("%s: tensor %q: dtype %s, want F32, F16 or BF16", t.File, t.Name, t.DType)
	}
	if i := t.NonFinite(); i >= 0 {
		return nil, fmt.Errorf("%s: tensor %q holds a NaN or infinity at %d (row %d)", t.File, t.Name, i, i/c.Hidden)
	}
	return &models.Tensor{Name: "token_embd.weight", Type: typ, Cols: c.Hidden, Rows: c.Vocab,
		RowBytes: len(t.Data) / max(c.Vocab, 1), Data: t.Data}, nil
}
