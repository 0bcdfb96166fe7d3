// Package dgf is Dovetail's draft model on a device.Device: the Dynamic
// Gated Fusion of the target's feature with the next token's embedding,
// then M Llama decoder blocks (package block) that predict the target's
// next feature, whose logits come from the target's own LM head. The
// target's embeddings and LM head are frozen, in their stored formats.
//
// The package holds the model: its forward and backward passes (Acts,
// Grads), its initialization, its drafting form (Q8_0 copies of the large
// matrices), the drafting sequences that grow trees with a KV cache, and
// the live versions a trainer (package train) publishes into.
package dgf

import (
	"fmt"

	"dovetail/block"
	"dovetail/device"
	"dovetail/models"
	"dovetail/models/draft"
)

// Param is one trainable tensor of the draft on the device: its values W
// (Rows × Cols), their gradient G (nil until Draft.EnableGrad) and Q, a
// Q8_0 copy that drafting multiplies with instead, set by
// FreezeForDrafting on a draft that will not train (nil otherwise; after
// DropFloat the only copy, and W is nil).
type Param struct {
	draft.Shape
	block.Weight
	qt *models.Tensor // Q's values
}

// Draft is the Dovetail draft on a device: DGF, M Llama decoder blocks, no
// final norm, and the target's embeddings and LM head (frozen, in their
// stored format) for its inputs and logits. The same type runs published
// EAGLE drafts (C.Kind): EAGLE-1's fc over [embedding ‖ feature] in place
// of the DGF; EAGLE-3's fc over three target layers' states, one layer
// over [embedding ‖ state], and its own norm and head over a reduced
// vocabulary (Head is then nil).
type Draft struct {
	Dev        device.Device
	C          draft.Config
	Embd, Head device.Matrix
	Params     []*Param // in draft.Config.Shapes order
	// RopeFreqs divides each RoPE pair's frequency (an EAGLE draft of a
	// Llama 3.1 target; nil: none): the device must be a device.FreqRoPE.
	RopeFreqs []float32
	// D2T maps the head's rows to the target's tokens (EAGLE-3's reduced
	// vocabulary; nil: row i is token i).
	D2T []int32

	embdT, headT *models.Tensor // where Embd and Head came from

	embNorm, w1, w2, wz *Param // DGF
	fc, fcBias          *Param // EAGLE
	hiddenNorm, inNorm  *Param // EAGLE-3
	outNorm, out        *Param // EAGLE-3
	blocks              []block.Weights
	residualEnds        []*Param // each block's attn_output and ffn_down: the ends of its two residual branches

	qbuf []byte // where a GPU's Q8_0 copies are made before it takes them (freezeRows), reused
}

// NewDraft allocates a draft of shape c for target m (whose embeddings and
// LM head it shares) with zero weights: call Init or Load next.
func NewDraft(dev device.Device, c draft.Config, m *models.Llama) (_ *Draft, err error) {
	return NewDraftEmbedding(dev, c, m, nil)
}

// NewDraftEmbedding is NewDraft with embeddings of the draft's own (an
// EAGLE checkpoint's; nil: the target's). An EAGLE-3 draft has a head of
// its own and does not upload the target's.
func NewDraftEmbedding(dev device.Device, c draft.Config, m *models.Llama, embd *models.Tensor) (_ *Draft, err error) {
	var d *Draft
	defer func() {
		if err != nil && d != nil {
			d.Free() // what bind allocated before the device gave out
		}
	}()
	defer device.Catch(&err)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Hidden != m.Config.Hidden || c.Vocab != m.Config.Vocab {
		return nil, fmt.Errorf("draft of hidden size %d and vocabulary %d cannot run with a target of %d and %d",
			c.Hidden, c.Vocab, m.Config.Hidden, m.Config.Vocab)
	}
	if embd == nil {
		embd = m.TokenEmbd
	}
	if embd.Rows != c.Vocab || embd.Cols != c.Hidden {
		return nil, fmt.Errorf("draft embeddings of %d×%d, want %d×%d", embd.Rows, embd.Cols, c.Vocab, c.Hidden)
	}
	d = &Draft{Dev: dev, C: c, embdT: embd}
	if d.Embd, err = dev.UploadMatrix(embd); err != nil {
		return nil, err
	}
	if c.Kind != draft.EAGLE3 {
		d.headT = m.Output
		if d.Head, err = dev.UploadMatrix(m.Output); err != nil {
			return nil, err
		}
	}
	d.bind(false)
	return d, nil
}

// Shape is the draft's blocks' shape.
func (d *Draft) Shape() block.Shape {
	c := d.C
	return block.Shape{Hidden: c.Hidden, FFN: c.FFN, Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim,
		RMSEps: c.RMSEps, RopeTheta: c.RopeTheta, AttnIn: c.AttnIn(0)}
}

// bind allocates the parameters and names them; with drafting, only those
// that stay float32 when frozen (see DropFloat).
func (d *Draft) bind(drafting bool) {
	c, dev := d.C, d.Dev
	byName := map[string]*Param{}
	for _, s := range c.Shapes() {
		p := &Param{Shape: s}
		if !drafting || !d.quantizes(p) {
			p.W = dev.Alloc(s.Size())
		}
		d.Params = append(d.Params, p)
		byName[s.Name] = p
	}
	d.embNorm, d.w1, d.w2, d.wz = byName[draft.NameEmbedNorm], byName[draft.NameW1], byName[draft.NameW2], byName[draft.NameWz]
	d.fc, d.fcBias = byName[draft.NameFC], byName[draft.NameFCBias]
	d.hiddenNorm, d.inNorm = byName[draft.NameHiddenNorm], byName[draft.NameInputNorm]
	d.outNorm, d.out = byName[draft.NameOutputNorm], byName[draft.NameOutput]
	d.blocks = make([]block.Weights, c.Blocks)
	for b := range d.blocks {
		w := func(n string) *block.Weight {
			if p := byName[draft.BlockTensor(b, n)]; p != nil {
				return &p.Weight
			}
			return nil // block 0's attention norm: it reads the DGF output as is
		}
		d.blocks[b] = block.Weights{AttnNorm: w("attn_norm.weight"), Q: w("attn_q.weight"), K: w("attn_k.weight"),
			V: w("attn_v.weight"), O: w("attn_output.weight"), FFNNorm: w("ffn_norm.weight"),
			Gate: w("ffn_gate.weight"), Up: w("ffn_up.weight"), Down: w("ffn_down.weight")}
		d.residualEnds = append(d.residualEnds, byName[draft.BlockTensor(b, "attn_output.weight")],
			byName[draft.BlockTensor(b, "ffn_down.weight")])
	}
}

// Load copies a checkpoint's weights to the device. The checkpoint must
// have this draft's shape.
func (d *Draft) Load(ck *draft.Checkpoint) error {
	if ck.Config != d.C {
		return fmt.Errorf("draft checkpoint has shape %+v, the draft %+v", ck.Config, d.C)
	}
	for _, p := range d.Params {
		v, ok := ck.Tensors[p.Name]
		if !ok || len(v) != p.Size() {
			return fmt.Errorf("draft checkpoint: tensor %s missing or of the wrong size", p.Name)
		}
		d.Dev.Upload(p.W, v)
	}
	return nil
}

// Checkpoint copies the weights to the host as a checkpoint for the target
// with this fingerprint and name.
func (d *Draft) Checkpoint(fingerprint, targetName string) *draft.Checkpoint {
	ck := &draft.Checkpoint{Config: d.C, Fingerprint: fingerprint, TargetName: targetName,
		Tensors: map[string][]float32{}, Meta: map[string]string{}}
	for _, p := range d.Params {
		ck.Tensors[p.Name] = d.Values(nil, p)
	}
	return ck
}

// EnableGrad allocates a gradient buffer for every parameter.
func (d *Draft) EnableGrad() {
	for _, p := range d.Params {
		if p.G == nil {
			p.G = d.Dev.Alloc(p.Size())
		}
	}
}

// ZeroGrad clears the gradients.
func (d *Draft) ZeroGrad() {
	for _, p := range d.Params {
		d.Dev.Zero(p.G)
	}
}

// Free releases the parameters.
func (d *Draft) Free() {
	for _, p := range d.Params {
		if p.W != nil {
			d.Dev.Free(p.W)
		}
		if p.G != nil {
			d.Dev.Free(p.G)
		}
		d.dropQ(p)
	}
}
