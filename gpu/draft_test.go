package gpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"dovetail/models"
	"dovetail/models/draft"
)

// fakeTarget is what a draft reads of a target: embeddings and LM head.
func fakeTarget(rng *rand.Rand, hidden, vocab int) *models.Llama {
	m := &models.Llama{Config: models.Config{Hidden: hidden, Vocab: vocab}}
	m.TokenEmbd = f32Tensor("token_embd.weight", vocab, hidden, randVals(rng, vocab*hidden, 1))
	m.Output = f32Tensor("output.weight", vocab, hidden, randVals(rng, vocab*hidden, 1))
	return m
}

var tinyConfig = draft.Config{Hidden: 8, Blocks: 2, Heads: 2, KVHeads: 1, HeadDim: 4, FFN: 12, Vocab: 16,
	Context: 64, RopeTheta: 10000, RMSEps: 1e-5}

func randWindow(rng *rand.Rand, T, hidden, vocab int, scale float64) Window {
	w := Window{}
	for range T + 1 {
		w.Tokens = append(w.Tokens, rng.IntN(vocab))
		f := make([]float32, hidden)
		for i := range f {
			f[i] = float32(scale * (2*rng.Float64() - 1))
		}
		w.Features = append(w.Features, f)
	}
	return w
}

// The whole draft's gradient (DGF, blocks, both losses, and training-time
// test through the draft's own predictions) against finite differences of
// its loss, in float64.
func TestGradDraft(t *testing.T) {
	for _, tc := range []struct {
		unroll int
		anchor float32
	}{{1, 0}, {3, 0}, {2, 0.7}} {
		unroll := tc.unroll
		rng := rand.New(rand.NewPCG(11, uint64(unroll)))
		h := newHost[float64](2)
		d, err := NewDraft(h, tinyConfig, fakeTarget(rng, tinyConfig.Hidden, tinyConfig.Vocab))
		if err != nil {
			t.Fatal(err)
		}
		d.Init(3)
		// Norm weights away from 1, so that their gradients are generic.
		for _, p := range d.Params {
			if p.Rows == 1 {
				for i := range vals(p.W) {
					vals(p.W)[i] = 1 + 0.3*(2*rng.Float64()-1)
				}
			}
		}
		cfg := DefaultTrainConfig()
		cfg.Unroll, cfg.ProbWeight, cfg.AnchorWeight = unroll, 0.5, tc.anchor
		tr, err := NewTrainer(d, cfg, 16, 8)
		if err != nil {
			t.Fatal(err)
		}
		if tc.anchor > 0 {
			// The per-request term, toward another draft's distribution.
			a, err := d.Clone(h)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range a.Params {
				for i := range vals(p.W) {
					vals(p.W)[i] += 0.2 * (2*rng.Float64() - 1)
				}
			}
			if err := tr.SetAnchor(a); err != nil {
				t.Fatal(err)
			}
		}
		ws := []Window{randWindow(rng, 5, 8, 16, 0.5), randWindow(rng, 3, 8, 16, 0.5)}
		if _, _, err := tr.run(ws, true); err != nil {
			t.Fatal(err)
		}
		loss := func() float64 {
			m, _, err := tr.run(ws, false)
			if err != nil {
				t.Fatal(err)
			}
			return m.Loss
		}
		for _, p := range d.Params {
			x, g := vals(p.W), append([]float64(nil), vals(p.G)...)
			worst := 0.0
			for j := range x {
				orig := x[j]
				x[j] = orig + fdEps
				lp := loss()
				x[j] = orig - fdEps
				lm := loss()
				x[j] = orig
				num := (lp - lm) / (2 * fdEps)
				e := math.Abs(num-g[j]) / max(1e-3, math.Abs(num), math.Abs(g[j]))
				worst = max(worst, e)
				if e > 1e-5 {
					t.Fatalf("unroll %d, anchor %g: %s[%d]: backward %.9g, finite differences %.9g", unroll, tc.anchor, p.Name, j, g[j], num)
				}
			}
			t.Logf("unroll %d, anchor %g: %s: %d values, worst relative error %.2g", unroll, tc.anchor, p.Name, len(x), worst)
		}
	}
}

// newDraft32 is a random float32 draft on the host device.
func newDraft32(t *testing.T, c draft.Config, seed uint64) *Draft {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0))
	d, err := NewDraft(newHost[float32](2), c, fakeTarget(rng, c.Hidden, c.Vocab))
	if err != nil {
		t.Fatal(err)
	}
	d.Init(seed)
	return d
}

func closeTo(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > tol*max(1, math.Abs(float64(want[i]))) {
			t.Fatalf("%s[%d] = %g, want %g", what, i, got[i], want[i])
		}
	}
}

// A tree grown with batched Extend calls gives every node the logits and
// feature that a single-path Forward of its path gives.
func TestTreeMatchesPaths(t *testing.T) {
	c := tinyConfig
	d := newDraft32(t, c, 5)
	rng := rand.New(rand.NewPCG(5, 5))
	prefix := randWindow(rng, 6, c.Hidden, c.Vocab, 1)
	s := d.NewSequence(0)
	if _, _, err := s.Forward(prefix.Features[:6], prefix.Tokens[1:7]); err != nil {
		t.Fatal(err)
	}
	// Three rounds of expansion: 3 children of the root, then children of
	// some of them, then deeper, with features taken from the parent.
	type node struct {
		parent  int
		tok     int
		feat    []float32
		logits  []float32
		predict []float32
	}
	var nodes []node
	rootPred := prefix.Features[6]
	rounds := [][]int{{-1, -1, -1}, {0, 0, 2}, {3, 5, 5, 1}}
	for _, parents := range rounds {
		var feats [][]float32
		var toks []int
		for _, p := range parents {
			f := rootPred
			if p >= 0 {
				f = nodes[p].predict
			}
			feats = append(feats, f)
			toks = append(toks, rng.IntN(c.Vocab))
		}
		lg, pr, err := s.Extend(feats, toks, parents)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range parents {
			nodes = append(nodes, node{parent: p, tok: toks[i], feat: feats[i],
				logits: append([]float32(nil), lg[i]...), predict: append([]float32(nil), pr[i]...)})
		}
	}
	for i, n := range nodes {
		var path []int
		for x := i; x >= 0; x = nodes[x].parent {
			path = append([]int{x}, path...)
		}
		if err := s.Truncate(6); err != nil {
			t.Fatal(err)
		}
		var feats [][]float32
		var toks []int
		for _, x := range path {
			feats, toks = append(feats, nodes[x].feat), append(toks, nodes[x].tok)
		}
		lg, pr, err := s.Forward(feats, toks)
		if err != nil {
			t.Fatal(err)
		}
		closeTo(t, "logits", lg, n.logits, 1e-5)
		closeTo(t, "feature", pr, n.predict, 1e-5)
	}
}

// Training's forward (windows side by side, causal, and unroll steps with
// the training-time-test mask) computes what drafting computes: position by
// position for step 0, and the tree child along the diagonal for step 1.
func TestTrainingForwardMatchesDrafting(t *testing.T) {
	c := tinyConfig
	d := newDraft32(t, c, 9)
	rng := rand.New(rand.NewPCG(9, 9))
	cfg := DefaultTrainConfig()
	cfg.Unroll = 2
	tr, err := NewTrainer(d, cfg, 32, 16)
	if err != nil {
		t.Fatal(err)
	}
	ws := []Window{randWindow(rng, 7, c.Hidden, c.Vocab, 1), randWindow(rng, 9, c.Hidden, c.Vocab, 1)}
	if _, _, err := tr.run(ws, false); err != nil {
		t.Fatal(err)
	}
	row := 0
	H := c.Hidden
	for _, w := range ws {
		T := len(w.Tokens) - 1
		out0, out1 := make([]float32, T*H), make([]float32, T*H)
		d.Dev.Download(out0, d.Dev.View(tr.steps[0].Out(), row*H, T*H))
		d.Dev.Download(out1, d.Dev.View(tr.steps[1].Out(), row*H, T*H))
		s := d.NewSequence(0)
		for p := range T {
			_, pred, err := s.Forward(w.Features[p:p+1], w.Tokens[p+1:p+2])
			if err != nil {
				t.Fatal(err)
			}
			closeTo(t, "step 0 feature", pred, out0[p*H:(p+1)*H], 1e-5)
			if p+2 > T {
				continue
			}
			_, child, err := s.Extend([][]float32{append([]float32(nil), pred...)}, w.Tokens[p+2:p+3], []int{-1})
			if err != nil {
				t.Fatal(err)
			}
			closeTo(t, "step 1 feature", child[0], out1[p*H:(p+1)*H], 1e-5)
		}
		row += T
	}
}

// Training on a fixed batch lowers the loss: the gradients point
// downhill and the optimizer follows them.
func TestTrainingReducesLoss(t *testing.T) {
	c := tinyConfig
	d := newDraft32(t, c, 13)
	rng := rand.New(rand.NewPCG(13, 13))
	cfg := DefaultTrainConfig()
	cfg.LR, cfg.Warmup = 3e-3, 1
	tr, err := NewTrainer(d, cfg, 64, 16)
	if err != nil {
		t.Fatal(err)
	}
	ws := []Window{randWindow(rng, 16, c.Hidden, c.Vocab, 1), randWindow(rng, 16, c.Hidden, c.Vocab, 1)}
	first, err := tr.Eval(ws)
	if err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if _, err := tr.Step(ws); err != nil {
			t.Fatal(err)
		}
	}
	last, _ := tr.Eval(ws)
	if !(last.Loss < 0.7*first.Loss) {
		t.Errorf("loss %.4f after 100 steps, %.4f before", last.Loss, first.Loss)
	}
	t.Logf("loss %.4f → %.4f, top-1 %.2f → %.2f", first.Loss, last.Loss, first.Top1[0], last.Top1[0])
}

// A day-0 draft is Init's with every block's attn_output and ffn_down at
// zero, and training moves those off zero.
func TestInitDayZero(t *testing.T) {
	c := tinyConfig
	rng := rand.New(rand.NewPCG(21, 0))
	target := fakeTarget(rng, c.Hidden, c.Vocab)
	d, err := NewDraft(newHost[float32](2), c, target)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := NewDraft(newHost[float32](2), c, target)
	if err != nil {
		t.Fatal(err)
	}
	d.InitDayZero(5)
	ref.Init(5)
	download := func(d *Draft, p *Param) []float32 {
		v := make([]float32, p.Size())
		d.Dev.Download(v, p.W)
		return v
	}
	isZero := func(v []float32) bool { return !slices.ContainsFunc(v, func(x float32) bool { return x != 0 }) }
	zeroed := 0
	for i, p := range d.Params {
		got, want := download(d, p), download(ref, ref.Params[i])
		branchEnd := strings.HasSuffix(p.Name, "attn_output.weight") || strings.HasSuffix(p.Name, "ffn_down.weight")
		switch {
		case branchEnd && !isZero(got):
			t.Errorf("%s not zero", p.Name)
		case branchEnd:
			zeroed++
		case !slices.Equal(got, want):
			t.Errorf("%s differs from Init's", p.Name)
		}
	}
	if zeroed != 2*c.Blocks {
		t.Fatalf("%d matrices zeroed, want %d", zeroed, 2*c.Blocks)
	}
	tr, err := NewTrainer(d, DefaultTrainConfig(), 64, 16)
	if err != nil {
		t.Fatal(err)
	}
	ws := []Window{randWindow(rng, 16, c.Hidden, c.Vocab, 1)}
	for range 3 {
		if _, err := tr.Step(ws); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range d.blocks {
		for _, p := range []*Param{b.o, b.down} {
			if isZero(download(d, p)) {
				t.Errorf("%s still zero after training", p.Name)
			}
		}
	}
}

// Drafting multiplies by the Q8_0 copies of the large matrices once a
// draft is frozen, and lands within Q8_0's rounding of the float32
// result; training still reads the float32 weights.
func TestFreezeForDrafting(t *testing.T) {
	defer func(v int) { freezeMin = v }(freezeMin)
	c := draft.Config{Hidden: 64, Blocks: 1, Heads: 4, KVHeads: 2, HeadDim: 16, FFN: 96, Vocab: 40,
		Context: 64, RopeTheta: 10000, RMSEps: 1e-5}
	freezeMin = c.Hidden * c.Hidden // larger: the gate and the FFN's three matrices
	d := newDraft32(t, c, 4)
	ref := newDraft32(t, c, 4)
	if err := d.FreezeForDrafting(); err != nil {
		t.Fatal(err)
	}
	var frozen []string
	for _, p := range d.Params {
		if p.Q != nil {
			frozen = append(frozen, p.Name)
		}
	}
	want := []string{draft.NameWz, draft.BlockTensor(0, "ffn_gate.weight"), draft.BlockTensor(0, "ffn_up.weight"), draft.BlockTensor(0, "ffn_down.weight")}
	slices.Sort(frozen)
	slices.Sort(want)
	if !slices.Equal(frozen, want) {
		t.Fatalf("frozen %v, want %v", frozen, want)
	}
	rng := rand.New(rand.NewPCG(4, 4))
	w := randWindow(rng, 6, c.Hidden, c.Vocab, 1)
	sd, sr := d.NewSequence(0), ref.NewSequence(0)
	lg, pred, err := sd.Forward(w.Features[:6], w.Tokens[1:7])
	if err != nil {
		t.Fatal(err)
	}
	lg, pred = slices.Clone(lg), slices.Clone(pred)
	lgRef, predRef, err := sr.Forward(w.Features[:6], w.Tokens[1:7])
	if err != nil {
		t.Fatal(err)
	}
	closeTo(t, "frozen feature", pred, predRef, 0.05)
	closeTo(t, "frozen logits", lg, lgRef, 0.05)
	if slices.Equal(pred, predRef) {
		t.Error("the frozen draft predicted the float32 draft's very features: its Q8_0 copies went unused")
	}
	sd.Free()
	sr.Free()
	// Training reads W: one step from the same weights gives the same loss.
	var loss [2]float64
	for i, dr := range []*Draft{d, ref} {
		tr, err := NewTrainer(dr, DefaultTrainConfig(), 64, 16)
		if err != nil {
			t.Fatal(err)
		}
		m, err := tr.Step([]Window{w})
		if err != nil {
			t.Fatal(err)
		}
		loss[i] = m.Loss
	}
	if loss[0] != loss[1] {
		t.Errorf("training loss %v on the frozen draft, %v on the float32 one", loss[0], loss[1])
	}
}

// TargetSharpness sharpens only the cross-entropy's target: 1 changes
// nothing, 3 changes the soft cross-entropy but neither the features'
// SmoothL1 nor the top-1 agreement (the target's argmax stays).
func TestTargetSharpness(t *testing.T) {
	c := tinyConfig
	d := newDraft32(t, c, 21)
	rng := rand.New(rand.NewPCG(21, 21))
	ws := []Window{randWindow(rng, 16, c.Hidden, c.Vocab, 1), randWindow(rng, 12, c.Hidden, c.Vocab, 1)}
	eval := func(s float32) Metrics {
		cfg := DefaultTrainConfig()
		cfg.TargetSharpness = s
		tr, err := NewTrainer(d, cfg, 64, 16)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Free()
		m, err := tr.Eval(ws)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	off, one, sharp := eval(0), eval(1), eval(3)
	if one.ProbLoss != off.ProbLoss || one.FeatLoss != off.FeatLoss {
		t.Errorf("sharpness 1: losses %v %v, want %v %v", one.ProbLoss, one.FeatLoss, off.ProbLoss, off.FeatLoss)
	}
	if sharp.FeatLoss != off.FeatLoss || sharp.Top1[0] != off.Top1[0] {
		t.Errorf("sharpness 3: SmoothL1 %v, top-1 %v; want %v, %v", sharp.FeatLoss, sharp.Top1[0], off.FeatLoss, off.Top1[0])
	}
	if math.Abs(sharp.ProbLoss-off.ProbLoss) < 1e-3*off.ProbLoss {
		t.Errorf("sharpness 3: cross-entropy %v, the same as unsharpened", sharp.ProbLoss)
	}
}

// A scorer scores as a trainer of its unroll does, from the buffers it
// borrows, without gradients or optimizer state of its own; it does not
// train.
func TestScorer(t *testing.T) {
	c := tinyConfig
	d := newDraft32(t, c, 31)
	rng := rand.New(rand.NewPCG(31, 31))
	ws := []Window{randWindow(rng, 8, c.Hidden, c.Vocab, 1), randWindow(rng, 5, c.Hidden, c.Vocab, 1)}
	cfg := DefaultTrainConfig()
	tr, err := NewTrainer(d, cfg, 32, 16)
	if err != nil {
		t.Fatal(err)
	}
	dev := d.Dev.(*host[float32])
	held := dev.Held()
	sc, err := NewScorer(tr, 3)
	if err != nil {
		t.Fatal(err)
	}
	scorerBytes := dev.Held() - held
	cfg.Unroll = 3
	ref, err := NewTrainer(d, cfg, 32, 16)
	if err != nil {
		t.Fatal(err)
	}
	refBytes := dev.Held() - held - scorerBytes
	// Its own: per block the attention weights of its deepest step (32
	// rows × 2 heads × 3 steps of 16 keys), and every step's keys and
	// values (3 × 32 rows × 4); the activations are the trainer's.
	if own := uint64(4 * c.Blocks * (32*2*3*16 + 2*3*32*4)); scorerBytes != own {
		t.Errorf("the scorer holds %d bytes, by hand %d, a trainer of its unroll %d", scorerBytes, own, refBytes)
	}
	for range 2 { // the second time after the trainer used the shared buffers
		got, err := sc.Eval(ws)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ref.Eval(ws)
		if got.Loss != want.Loss || got.Tau != want.Tau || !slices.Equal(got.Top1, want.Top1) {
			t.Fatalf("scorer %+v, trainer %+v", got, want)
		}
		if _, err := tr.Step(ws); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sc.Step(ws); err == nil || !strings.Contains(err.Error(), "scorer") {
		t.Errorf("a scorer's Step: %v", err)
	}
	ref.Free()
	sc.Free()
	if got := dev.Held(); got != held {
		t.Errorf("freeing the scorer left %d bytes held, %d before it", got, held)
	}
	tr.Free()
}
