package gpu

import (
	"errors"
	"fmt"
	"slices"

	"dovetail/models"
	"dovetail/models/draft"
	"dovetail/quant"
)

// Param is one trainable tensor of the draft on the device.
type Param struct {
	draft.Shape
	W Buffer // values, Rows × Cols
	G Buffer // gradient, nil until Draft.EnableGrad
	// Q is a Q8_0 copy of W that drafting multiplies with instead, set by
	// FreezeForDrafting on a draft that will not train; nil otherwise.
	// After DropFloat it is the only copy, and W is nil.
	Q  Matrix
	qt *models.Tensor // Q's values
}

// block holds one decoder block's parameters.
type block struct {
	attnNorm                *Param // nil in block 0, which reads the DGF output as is
	q, k, v, o              *Param
	ffnNorm, gate, up, down *Param
}

// Draft is the Dovetail draft on a device: DGF, M Llama decoder blocks, no
// final norm, and the target's embeddings and LM head (frozen, in their
// stored format) for its inputs and logits.
type Draft struct {
	Dev        Device
	C          draft.Config
	Embd, Head Matrix
	Params     []*Param // in draft.Config.Shapes order

	embdT, headT *models.Tensor // where Embd and Head came from

	embNorm, w1, w2, wz *Param
	blocks              []block
}

// NewDraft allocates a draft of shape c for target m (whose embeddings and
// LM head it shares) with zero weights: call Init or Load next.
func NewDraft(dev Device, c draft.Config, m *models.Llama) (_ *Draft, err error) {
	var d *Draft
	defer func() {
		if err != nil && d != nil {
			d.Free() // what bind allocated before the device gave out
		}
	}()
	defer catchDevice(&err)
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Hidden != m.Config.Hidden || c.Vocab != m.Config.Vocab {
		return nil, fmt.Errorf("draft of hidden size %d and vocabulary %d cannot run with a target of %d and %d",
			c.Hidden, c.Vocab, m.Config.Hidden, m.Config.Vocab)
	}
	d = &Draft{Dev: dev, C: c, embdT: m.TokenEmbd, headT: m.Output}
	if d.Embd, err = dev.UploadMatrix(m.TokenEmbd); err != nil {
		return nil, err
	}
	if d.Head, err = dev.UploadMatrix(m.Output); err != nil {
		return nil, err
	}
	d.bind(false)
	return d, nil
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
	d.blocks = make([]block, c.Blocks)
	for b := range d.blocks {
		p := func(n string) *Param { return byName[draft.BlockTensor(b, n)] }
		d.blocks[b] = block{attnNorm: p("attn_norm.weight"), q: p("attn_q.weight"), k: p("attn_k.weight"),
			v: p("attn_v.weight"), o: p("attn_output.weight"), ffnNorm: p("ffn_norm.weight"),
			gate: p("ffn_gate.weight"), up: p("ffn_up.weight"), down: p("ffn_down.weight")}
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
		ck.Tensors[p.Name] = d.values(nil, p)
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

// acts are the activations of one pass over n rows, kept for backward.
type acts struct {
	n                                   int
	drafting                            bool   // keys and values go to a cache: matrices' Q8_0 copies may serve
	f, e, en, h1, a2, h2, cat, zpre, x0 Buffer // DGF; x0 [n×H] feeds block 0
	blk                                 []blockActs
}

// blockActs are one block's activations. k and v are where this pass's
// keys and values go: its own buffers in training, a KV cache when
// drafting. probs holds the attention weights.
type blockActs struct {
	xn, q, k, v, att, probs, ao, mid, xn2, g, u, hh, dn, out Buffer
}

// Out is the predicted feature f̂ of every row (the last block's output).
func (a *acts) Out() Buffer { return a.blk[len(a.blk)-1].out }

// fields lists the buffers of a with their widths per row (probs: per
// block, given separately). withKV includes k and v.
func (a *acts) fields(c draft.Config, withKV bool) (bufs []*Buffer, widths []int) {
	H, F, Q, KV := c.Hidden, c.FFN, c.QDim(), c.KVDim()
	add := func(b *Buffer, w int) { bufs, widths = append(bufs, b), append(widths, w) }
	add(&a.f, H)
	add(&a.e, H)
	add(&a.en, H)
	add(&a.h1, H)
	add(&a.a2, H)
	add(&a.h2, H)
	add(&a.cat, 2*H)
	add(&a.zpre, H)
	add(&a.x0, H)
	for b := range a.blk {
		ba := &a.blk[b]
		if b > 0 {
			add(&ba.xn, H)
		}
		add(&ba.q, Q)
		if withKV {
			add(&ba.k, KV)
			add(&ba.v, KV)
		}
		for _, f := range []struct {
			b *Buffer
			w int
		}{{&ba.att, Q}, {&ba.ao, H}, {&ba.mid, H}, {&ba.xn2, H}, {&ba.g, F}, {&ba.u, F}, {&ba.hh, F}, {&ba.dn, H}, {&ba.out, H}} {
			add(f.b, f.w)
		}
	}
	return bufs, widths
}

// allocActs allocates activations for up to rows rows and probs attention
// weights per block.
func (d *Draft) allocActs(rows, probs int, withKV bool) *acts {
	a := &acts{n: rows, drafting: !withKV, blk: make([]blockActs, d.C.Blocks)}
	bufs, widths := a.fields(d.C, withKV)
	for i, b := range bufs {
		*b = d.Dev.Alloc(rows * widths[i])
	}
	for b := range a.blk {
		a.blk[b].probs = d.Dev.Alloc(max(probs, 1))
		if b == 0 {
			a.blk[b].xn = a.x0
		}
	}
	return a
}

// view is a's first n rows and probs attention weights.
func (a *acts) view(dev Device, c draft.Config, n, probs int, withKV bool) *acts {
	v := &acts{n: n, drafting: a.drafting, blk: make([]blockActs, len(a.blk))}
	src, widths := a.fields(c, withKV)
	dst, _ := v.fields(c, withKV)
	for i := range src {
		*dst[i] = dev.View(*src[i], 0, n*widths[i])
	}
	for b := range v.blk {
		v.blk[b].probs = dev.View(a.blk[b].probs, 0, probs)
		if b == 0 {
			v.blk[b].xn = v.x0
		}
	}
	return v
}

func (a *acts) free(dev Device, c draft.Config, withKV bool) {
	bufs, _ := a.fields(c, withKV)
	for _, b := range bufs {
		dev.Free(*b)
	}
	for _, ba := range a.blk {
		dev.Free(ba.probs)
	}
}

// attender runs a pass's attention: where the keys are and what each row
// sees differ between training (windows side by side, causal) and drafting
// (a KV cache and a tree).
type attender interface {
	forward(d *Draft, b int, ba *blockActs)
	backward(d *Draft, b int, ba *blockActs, dq, dk, dv, datt Buffer)
}

// forward runs the DGF and the blocks over a.n rows: a.f holds the input
// features; tokens are the inputs' next tokens (x_{t+1}) and pos the RoPE
// positions. The predicted features end in a.Out().
func (d *Draft) forward(a *acts, tokens, pos []int, at attender) {
	dev, c, n := d.Dev, d.C, a.n
	H, Q, KV, F := c.Hidden, c.QDim(), c.KVDim(), c.FFN
	dev.Embed(a.e, d.Embd, tokens)
	dev.RMSNorm(a.en, a.e, d.embNorm.W, n, H, c.RMSEps)
	d.matMul(a, a.h1, a.f, d.w1, n, H, H)
	d.matMul(a, a.a2, a.en, d.w2, n, H, H)
	dev.SiLU(a.h2, a.a2)
	dev.Concat(a.cat, a.h1, a.h2, n, H, H)
	d.matMul(a, a.zpre, a.cat, d.wz, n, 2*H, H)
	dev.Gate(a.x0, a.zpre, a.h1, a.h2)
	x := a.x0
	for b := range d.blocks {
		w, ba := &d.blocks[b], &a.blk[b]
		if w.attnNorm != nil {
			dev.RMSNorm(ba.xn, x, w.attnNorm.W, n, H, c.RMSEps)
		}
		d.matMul(a, ba.q, ba.xn, w.q, n, H, Q)
		d.matMul(a, ba.k, ba.xn, w.k, n, H, KV)
		d.matMul(a, ba.v, ba.xn, w.v, n, H, KV)
		dev.RoPE(ba.q, pos, c.Heads, c.HeadDim, c.RopeTheta)
		dev.RoPE(ba.k, pos, c.KVHeads, c.HeadDim, c.RopeTheta)
		at.forward(d, b, ba)
		d.matMul(a, ba.ao, ba.att, w.o, n, Q, H)
		dev.Add(ba.mid, x, ba.ao)
		dev.RMSNorm(ba.xn2, ba.mid, w.ffnNorm.W, n, H, c.RMSEps)
		d.matMul(a, ba.g, ba.xn2, w.gate, n, H, F)
		d.matMul(a, ba.u, ba.xn2, w.up, n, H, F)
		dev.SwiGLU(ba.hh, ba.g, ba.u)
		d.matMul(a, ba.dn, ba.hh, w.down, n, F, H)
		dev.Add(ba.out, ba.mid, ba.dn)
		x = ba.out
	}
}

// matMul multiplies x [n×in] by p's matrix into out [n×o]: in a drafting
// pass by its Q8_0 copy when it has one, else by W.
func (d *Draft) matMul(a *acts, out, x Buffer, p *Param, n, in, o int) {
	if p.Q != nil && a.drafting {
		d.Dev.MatMulFrozen(out, x, p.Q, n)
		return
	}
	d.Dev.MatMul(out, x, p.W, n, in, o)
}

// freezeMin is the size above which FreezeForDrafting quantizes a matrix:
// the host device keeps smaller frozen matrices as float32 anyway
// (smallMatrix), where quantizing would cost accuracy and gain nothing.
var freezeMin = smallMatrix

// FreezeForDrafting gives each large matrix of a draft that will not train
// (a live version, a static draft) a Q8_0 copy that drafting multiplies
// with: drafting reads every weight once per tree level, and float32
// weights of a 7B-sized draft block are 800 MB; Q8_0 reads 3.8 times
// fewer bytes, with activations quantized as the target's are. Call it
// again after the weights change. Training and evaluation passes, which
// keep their own keys and values, read W.
func (d *Draft) FreezeForDrafting() error {
	return d.FreezeForDraftingUnless(nil)
}

// FreezeForDraftingUnless is FreezeForDrafting, giving up with ErrStopped
// before a matrix once stopped (nil: never) says so.
func (d *Draft) FreezeForDraftingUnless(stopped func() bool) error {
	var vals []float32
	for _, p := range d.Params {
		if stopped != nil && stopped() {
			return ErrStopped
		}
		if !d.quantizes(p) {
			d.dropQ(p)
			continue
		}
		if p.W == nil {
			continue // DropFloat: the Q8_0 copy is all there is
		}
		vals = d.values(vals, p)
		if err := d.freeze(p, vals); err != nil {
			return err
		}
	}
	return nil
}

// DropFloat frees the float32 values of the matrices drafting reads in
// Q8_0 (call FreezeForDrafting first): a draft that only drafts never
// reads them, and they are most of its memory. What copies or saves the
// draft afterwards reads the Q8_0 values.
func (d *Draft) DropFloat() {
	for _, p := range d.Params {
		if p.Q != nil && p.W != nil {
			d.Dev.Free(p.W)
			p.W = nil
		}
	}
}

// quantizes reports whether FreezeForDrafting gives p a Q8_0 copy. The
// CUDA device holds frozen matrices as float32: a Q8_0 copy there would
// only round the weights; the host keeps small ones as float32 anyway.
func (d *Draft) quantizes(p *Param) bool {
	if holdsFloat32(d.Dev) || p.Rows == 1 || p.Size() <= freezeMin {
		return false
	}
	_, err := quant.Q8_0.RowSize(p.Cols) // a row that is not whole blocks stays float32
	return err == nil
}

// values is p's values in buf (grown as needed): W's, or its Q8_0 copy's
// once W is dropped.
func (d *Draft) values(buf []float32, p *Param) []float32 {
	if _, counting := d.Dev.(*sizer); counting {
		return buf // Measure's devices hold no values
	}
	buf = slices.Grow(buf[:0], p.Size())[:p.Size()]
	if p.W != nil {
		d.Dev.Download(buf, p.W)
		return buf
	}
	for r := range p.Rows {
		// The row size was checked when the copy was made.
		_ = quant.DequantizeRow(quant.Q8_0, buf[r*p.Cols:(r+1)*p.Cols], p.qt.Row(r))
	}
	return buf
}

// freeze sets p's Q8_0 copy to vals, reusing the copy's memory.
func (d *Draft) freeze(p *Param, vals []float32) error {
	return d.freezeRows(p, func(r int) ([]float32, error) { return vals[r*p.Cols : (r+1)*p.Cols], nil })
}

// freezeRows sets p's Q8_0 copy to the rows row(0), row(1), ... in turn,
// reusing the copy's memory; an error of row's ends it, the copy dropped.
func (d *Draft) freezeRows(p *Param, row func(r int) ([]float32, error)) error {
	rb, _ := quant.Q8_0.RowSize(p.Cols)
	t := p.qt
	if t == nil {
		t = &models.Tensor{Name: p.Name, Type: quant.Q8_0, Rows: p.Rows, Cols: p.Cols, RowBytes: rb}
		if _, counting := d.Dev.(*sizer); !counting {
			t.Data = make([]byte, p.Rows*rb)
		}
		hold(d.Dev, p.Rows*rb) // the Q8_0 copy is the device's own
		p.qt = t
	}
	if t.Data != nil {
		for r := range p.Rows {
			v, err := row(r)
			if err == nil {
				err = quant.QuantizeRow(quant.Q8_0, t.Row(r), v)
			}
			if err != nil {
				d.dropQ(p)
				if errors.Is(err, ErrStopped) {
					return err
				}
				return fmt.Errorf("draft %s: %w", p.Name, err)
			}
		}
	}
	q, err := d.Dev.UploadMatrix(t)
	if err != nil {
		d.dropQ(p)
		return fmt.Errorf("draft %s: %w", p.Name, err)
	}
	p.Q = q
	return nil
}

// dropQ forgets p's Q8_0 copy.
func (d *Draft) dropQ(p *Param) {
	if p.qt != nil {
		hold(d.Dev, -p.Rows*p.qt.RowBytes)
	}
	p.Q, p.qt = nil, nil
}

// hold counts n bytes a device keeps of its own beyond its buffers, where
// it counts what it holds (the host device, and Measure's).
func hold(d Device, n int) {
	switch v := d.(type) {
	case *host[float32]:
		v.held.Add(int64(n))
	case *host[float64]:
		v.held.Add(int64(n))
	case *sizer:
		v.held += uint64(n)
	}
}

// grads is backward's scratch for one pass of up to rows rows.
type grads struct {
	dout, dmid, dxn2, dg, du, dhh, datt, dq, dk, dv, dxn, dxin Buffer
	dzpre, dh1, dh2, dcat, da2, den                            Buffer
}

func (g *grads) fields(c draft.Config) (bufs []*Buffer, widths []int) {
	H, F, Q, KV := c.Hidden, c.FFN, c.QDim(), c.KVDim()
	for _, f := range []struct {
		b *Buffer
		w int
	}{{&g.dout, H}, {&g.dmid, H}, {&g.dxn2, H}, {&g.dg, F}, {&g.du, F}, {&g.dhh, F}, {&g.datt, Q},
		{&g.dq, Q}, {&g.dk, KV}, {&g.dv, KV}, {&g.dxn, H}, {&g.dxin, H},
		{&g.dzpre, H}, {&g.dh1, H}, {&g.dh2, H}, {&g.dcat, 2 * H}, {&g.da2, H}, {&g.den, H}} {
		bufs, widths = append(bufs, f.b), append(widths, f.w)
	}
	return bufs, widths
}

func (d *Draft) allocGrads(rows int) *grads {
	g := &grads{}
	bufs, widths := g.fields(d.C)
	for i, b := range bufs {
		*b = d.Dev.Alloc(rows * widths[i])
	}
	return g
}

func (g *grads) view(dev Device, c draft.Config, n int) *grads {
	v := &grads{}
	src, widths := g.fields(c)
	dst, _ := v.fields(c)
	for i := range src {
		*dst[i] = dev.View(*src[i], 0, n*widths[i])
	}
	return v
}

func (g *grads) free(dev Device, c draft.Config) {
	bufs, _ := g.fields(c)
	for _, b := range bufs {
		dev.Free(*b)
	}
}
