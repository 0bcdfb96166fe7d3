package dgf

import (
	"math"
	"math/rand/v2"
	"testing"

	"dovetail/device"
	"dovetail/dgf/dgftest"
	"dovetail/models/draft"
)

// The EAGLE drafts' forward pass against a float64 reference written from
// the papers' equations (EAGLE: fc over [e ‖ f], decoder layers, the
// target's head; EAGLE-3: fc over three layers' states, one layer over
// [RMSNorm(e) ‖ RMSNorm(g)] with g its residual stream, its own norm and
// head over a reduced vocabulary), one position at a time with a cache
// of its keys and values, on committed positions and a branching tree.

var (
	eagle1Tiny = draft.Config{Hidden: 8, Blocks: 2, Heads: 2, KVHeads: 1, HeadDim: 4, FFN: 12, Vocab: 16,
		Context: 64, RopeTheta: 10000, RMSEps: 1e-5, Kind: draft.EAGLE1, FCBias: true}
	eagle3Tiny = draft.Config{Hidden: 8, Blocks: 1, Heads: 2, KVHeads: 1, HeadDim: 4, FFN: 12, Vocab: 16,
		Context: 64, RopeTheta: 500000, RMSEps: 1e-5, Kind: draft.EAGLE3, DraftVocab: 10, Aux: [3]int{0, 1, 2}}
)

// newEagle is a draft of c with every parameter random (norm weights
// around 1, so that a norm applied to the wrong tensor shows), its RoPE
// factors and vocabulary map set for EAGLE-3.
func newEagle(t *testing.T, c draft.Config, seed uint64) *Draft {
	t.Helper()
	d, err := NewDraft(device.NewHost(2), c, dgftest.Target(seed, c))
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 9))
	for _, p := range d.Params {
		v := make([]float32, p.Size())
		for i := range v {
			v[i] = float32(0.5 * (2*rng.Float64() - 1))
			if p.Rows == 1 {
				v[i] += 1
			}
		}
		d.Dev.Upload(p.W, v)
	}
	if c.Kind == draft.EAGLE3 {
		d.RopeFreqs = []float32{1, 6.5}
		for j := range c.HeadVocab() {
			d.D2T = append(d.D2T, int32((3*j+1)%c.Vocab))
		}
	}
	return d
}

// refEagle is the float64 reference: weights by name, the target's
// embeddings and head.
type refEagle struct {
	c          draft.Config
	w          map[string][]float64
	embd, head []float64
	freqs      []float32
	d2t        []int32
}

func newRef(d *Draft) *refEagle {
	r := &refEagle{c: d.C, w: map[string][]float64{}, freqs: d.RopeFreqs, d2t: d.D2T}
	for _, p := range d.Params {
		r.w[p.Name] = f64(d.Values(nil, p))
	}
	r.embd = tensorF64(d.embdT.Data)
	if d.headT != nil {
		r.head = tensorF64(d.headT.Data)
	}
	return r
}

// kv is one position's keys and values, per block.
type kv struct{ k, v [][]float64 }

// step runs one position: feature f (the target's, or a predicted state),
// token tok at RoPE position pos, seeing past (earlier positions' keys and
// values, in order). It returns this position's keys and values, the
// predicted feature and the logits over the target's vocabulary.
func (r *refEagle) step(f []float64, tok, pos int, past []kv) (kv, []float64, []float64) {
	c := r.c
	H := c.Hidden
	e := r.embd[tok*H : (tok+1)*H]
	var x, in []float64
	switch c.Kind {
	case draft.EAGLE1:
		x = add64(matvec(r.w[draft.NameFC], append(clone64(e), f...), H), r.w[draft.NameFCBias])
	case draft.EAGLE3:
		x = f
		if len(f) == 3*H {
			x = matvec(r.w[draft.NameFC], f, H)
		}
		in = append(rmsnorm64(e, r.w[draft.NameInputNorm], c.RMSEps), rmsnorm64(x, r.w[draft.NameHiddenNorm], c.RMSEps)...)
	}
	var mine kv
	for b := range c.Blocks {
		xn := x
		if b > 0 {
			xn = rmsnorm64(x, r.w[draft.BlockTensor(b, "attn_norm.weight")], c.RMSEps)
		}
		if in != nil {
			xn = in
		}
		q := r.rope(matvec(r.w[draft.BlockTensor(b, "attn_q.weight")], xn, c.QDim()), c.Heads, pos)
		k := r.rope(matvec(r.w[draft.BlockTensor(b, "attn_k.weight")], xn, c.KVDim()), c.KVHeads, pos)
		v := matvec(r.w[draft.BlockTensor(b, "attn_v.weight")], xn, c.KVDim())
		mine.k, mine.v = append(mine.k, k), append(mine.v, v)
		att := r.attend(q, b, past, mine)
		x = add64(x, matvec(r.w[draft.BlockTensor(b, "attn_output.weight")], att, H))
		xn2 := rmsnorm64(x, r.w[draft.BlockTensor(b, "ffn_norm.weight")], c.RMSEps)
		g := matvec(r.w[draft.BlockTensor(b, "ffn_gate.weight")], xn2, c.FFN)
		u := matvec(r.w[draft.BlockTensor(b, "ffn_up.weight")], xn2, c.FFN)
		for i := range g {
			g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
		}
		x = add64(x, matvec(r.w[draft.BlockTensor(b, "ffn_down.weight")], g, H))
	}
	if c.Kind != draft.EAGLE3 {
		return mine, x, matvec(r.head, x, c.Vocab)
	}
	ld := matvec(r.w[draft.NameOutput], rmsnorm64(x, r.w[draft.NameOutputNorm], c.RMSEps), c.HeadVocab())
	logits := make([]float64, c.Vocab)
	for i := range logits {
		logits[i] = math.Inf(-1)
	}
	for j, tgt := range r.d2t {
		logits[tgt] = ld[j]
	}
	return mine, x, logits
}

// rope turns each head's pairs (2i, 2i+1) by pos·θ^(−2i/hd)/freqs[i].
func (r *refEagle) rope(x []float64, heads, pos int) []float64 {
	hd := r.c.HeadDim
	for h := range heads {
		for i := 0; i < hd/2; i++ {
			a := float64(pos) * math.Pow(float64(r.c.RopeTheta), -2*float64(i)/float64(hd))
			if r.freqs != nil {
				a /= float64(r.freqs[i])
			}
			s, co := math.Sincos(a)
			x0, x1 := x[h*hd+2*i], x[h*hd+2*i+1]
			x[h*hd+2*i], x[h*hd+2*i+1] = x0*co-x1*s, x0*s+x1*co
		}
	}
	return x
}

// attend is block b's attention of q over past and this position.
func (r *refEagle) attend(q []float64, b int, past []kv, mine kv) []float64 {
	c := r.c
	hd, group := c.HeadDim, c.Heads/c.KVHeads
	keys := append(append([]kv{}, past...), mine)
	out := make([]float64, c.QDim())
	for h := range c.Heads {
		kh := h / group
		scores := make([]float64, len(keys))
		hi := math.Inf(-1)
		for t, p := range keys {
			for i := range hd {
				scores[t] += q[h*hd+i] * p.k[b][kh*hd+i]
			}
			scores[t] /= math.Sqrt(float64(hd))
			hi = max(hi, scores[t])
		}
		sum := 0.0
		for t := range scores {
			scores[t] = math.Exp(scores[t] - hi)
			sum += scores[t]
		}
		for t, p := range keys {
			for i := range hd {
				out[h*hd+i] += scores[t] / sum * p.v[b][kh*hd+i]
			}
		}
	}
	return out
}

func TestEAGLEForwardMatchesReference(t *testing.T) {
	for _, c := range []draft.Config{eagle1Tiny, eagle3Tiny} {
		t.Run(c.Kind.String(), func(t *testing.T) { checkEagleAgainstReference(t, c) })
	}
}

func checkEagleAgainstReference(t *testing.T, c draft.Config) {
	d := newEagle(t, c, 11)
	ref := newRef(d)
	rng := rand.New(rand.NewPCG(11, 3))
	const T = 5
	win := dgftest.RandWindow(rng, T, c.FeatureIn(), c.Vocab, 1)
	s := d.NewSequence(0)
	lg, pred, err := s.Forward(win.Features[:T], win.Tokens[1:T+1])
	if err != nil {
		t.Fatal(err)
	}
	var past []kv
	var want, wantLg []float64
	for i := range T {
		var mine kv
		mine, want, wantLg = ref.step(f64(win.Features[i]), win.Tokens[i+1], i, past)
		past = append(past, mine)
	}
	closeTo64(t, "committed predicted", pred, want)
	closeTo64(t, "committed logits", lg, wantLg)

	// A tree: three children of the root, then two under the first and
	// one under the third; every node reads its parent's prediction.
	type node struct {
		parent, tok int
		feat        []float64
		k           kv
		pred        []float64
	}
	nodes := []*node{}
	level := func(parents, toks []int) {
		feats := make([][]float32, len(toks))
		var refs []*node
		for i, p := range parents {
			nd := &node{parent: p, tok: toks[i], feat: want}
			if p >= 0 {
				nd.feat = nodes[p].pred
			}
			feats[i] = f32(nd.feat)
			refs = append(refs, nd)
		}
		lgs, preds, err := s.Extend(feats, toks, parents)
		if err != nil {
			t.Fatal(err)
		}
		for i, nd := range refs {
			seen := append([]kv{}, past...)
			var chain []kv
			for a := nd.parent; a >= 0; a = nodes[a].parent {
				chain = append([]kv{nodes[a].k}, chain...)
			}
			seen = append(seen, chain...)
			var wl []float64
			nd.k, nd.pred, wl = ref.step(nd.feat, nd.tok, T+len(chain), seen)
			closeTo64(t, "node predicted", preds[i], nd.pred)
			closeTo64(t, "node logits", lgs[i], wl)
		}
		nodes = append(nodes, refs...)
	}
	level([]int{-1, -1, -1}, []int{2, 7, 13})
	level([]int{0, 0, 2}, []int{4, 1, 9})
	level([]int{3}, []int{12})
}

// The ranked outputs of an EAGLE-3 draft are target tokens: its reduced
// vocabulary's best rows mapped through d2t, the argmax of the spread
// logits first.
func TestEAGLE3RanksTargetTokens(t *testing.T) {
	c := eagle3Tiny
	d := newEagle(t, c, 12)
	rng := rand.New(rand.NewPCG(12, 3))
	win := dgftest.RandWindow(rng, 4, c.FeatureIn(), c.Vocab, 1)
	s := d.NewSequence(0)
	lg, _, err := s.Forward(win.Features[:4], win.Tokens[1:5])
	if err != nil {
		t.Fatal(err)
	}
	best := 0
	for i, v := range lg {
		if v > lg[best] {
			best = i
		}
	}
	s.Truncate(0)
	top, _, err := s.ForwardTop(win.Features[:4], win.Tokens[1:5], 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if top[0].Token != best {
		t.Fatalf("top choice %d, the logits' argmax %d", top[0].Token, best)
	}
	image := map[int]bool{}
	for _, tgt := range d.D2T {
		image[int(tgt)] = true
	}
	for _, ch := range top {
		if !image[ch.Token] {
			t.Fatalf("ranked token %d is not in the draft vocabulary's image %v", ch.Token, d.D2T)
		}
	}
}

// Features of the wrong width are refused with a message naming both.
func TestEAGLE3FeatureWidths(t *testing.T) {
	d := newEagle(t, eagle3Tiny, 13)
	s := d.NewSequence(0)
	H := eagle3Tiny.Hidden
	if _, _, err := s.Forward([][]float32{make([]float32, H)}, []int{1}); err == nil {
		t.Fatal("a committed position with an H-wide feature was accepted: EAGLE-3 reads three layers")
	}
	if _, _, err := s.Forward([][]float32{make([]float32, 3*H)}, []int{1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Extend([][]float32{make([]float32, 3*H)}, []int{1}, []int{-1}); err == nil {
		t.Fatal("a tree node with a 3H-wide feature was accepted: nodes read the draft's own state")
	}
}

func matvec(w, x []float64, rows int) []float64 {
	cols := len(x)
	out := make([]float64, rows)
	for r := range rows {
		for i, xv := range x {
			out[r] += w[r*cols+i] * xv
		}
	}
	return out
}

func rmsnorm64(x, w []float64, eps float32) []float64 {
	ss := 0.0
	for _, v := range x {
		ss += v * v
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+float64(eps))
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * s * w[i]
	}
	return out
}

func add64(a, b []float64) []float64 {
	out := clone64(a)
	for i := range out {
		out[i] += b[i]
	}
	return out
}

func clone64(a []float64) []float64 { return append([]float64(nil), a...) }

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func f32(v []float64) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

func tensorF64(data []byte) []float64 {
	out := make([]float64, len(data)/4)
	for i := range out {
		out[i] = float64(math.Float32frombits(uint32(data[4*i]) | uint32(data[4*i+1])<<8 | uint32(data[4*i+2])<<16 | uint32(data[4*i+3])<<24))
	}
	return out
}

// closeTo64 compares float32 outputs with the reference: 1e-4 relative to
// max(1, |want|); −∞ (a token outside a reduced vocabulary) exactly.
func closeTo64(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i, w := range want {
		g := float64(got[i])
		if math.IsInf(w, -1) {
			if !math.IsInf(g, -1) {
				t.Fatalf("%s[%d] = %g, want −∞", what, i, g)
			}
			continue
		}
		if math.Abs(g-w) > 1e-4*max(1, math.Abs(w)) {
			t.Fatalf("%s[%d] = %g, want %g", what, i, g, w)
		}
	}
}
