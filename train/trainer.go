package train

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"dovetail/block"
	"dovetail/device"
	"dovetail/dgf"
	"dovetail/models/draft"
)

// Window is a stretch of text with the target's features (see
// draft.Window).
type Window = draft.Window

// positions is the number of training positions: T.
func positions(w Window) int { return len(w.Tokens) - 1 }

// TrainConfig is the training recipe: EAGLE's loss
// FeatureWeight·SmoothL1(f̂, f) + ProbWeight·softCE(lm_head(f), lm_head(f̂))
// per position, AdamW with warm-up and cosine decay, gradient clipping, and
// optionally training-time test: Unroll > 1 runs the draft Unroll times,
// step i reading the features step i−1 predicted (as the draft does when
// it grows a tree), with loss weight Decay^i.
type TrainConfig struct {
	LR, Beta1, Beta2, Eps, WeightDecay, Clip float32
	Warmup, TotalSteps                       int // learning-rate schedule; TotalSteps 0: constant after warm-up
	FeatureWeight, ProbWeight                float32
	Noise                                    float32 // uniform noise ±Noise on input features
	Unroll                                   int     // ≥ 1
	Decay                                    float32 // loss weight ratio between unroll steps
	Seed                                     uint64
	// AnchorWeight λ adds λ·KL(q_anchor ‖ q) at step 0, q_anchor being the
	// distribution of the draft given to Trainer.SetAnchor: Test-Time
	// Speculation's term that keeps a draft adapting within one request
	// close to where it started.
	AnchorWeight float32
	// TargetSharpness multiplies the target's logits before their softmax
	// becomes the cross-entropy's target (0 or 1: the target's own
	// distribution). A sharper target teaches the target's argmax, which
	// greedy verification accepts, instead of spreading a small draft over
	// the whole distribution. The features' SmoothL1 target stays as is.
	TargetSharpness float32
}

// DefaultTrainConfig is the Dovetail/EAGLE recipe with a learning rate for
// small drafts.
func DefaultTrainConfig() TrainConfig {
	return TrainConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.01, Clip: 0.5,
		Warmup: 50, FeatureWeight: 1, ProbWeight: 0.1, Unroll: 1, Decay: 0.8, Seed: 1}
}

// Metrics summarize a batch. Top1 is, for each unroll step i, the share of
// positions where the draft's most likely token is the target's (step 0:
// from the target's own features; step i: after i of the draft's own).
type Metrics struct {
	Loss      float64 // weighted total, as optimized
	FeatLoss  float64 // step 0's SmoothL1
	ProbLoss  float64 // step 0's soft cross-entropy
	Top1      []float64
	Positions int // step 0's
	GradNorm  float64
	// Tau is the simulated acceptance length of a greedy chain of Unroll
	// draft steps: 1 + the mean number of leading steps whose top token
	// is the target's, over the positions where every step has a target.
	// It is the τ of chain drafting with greedy verification. Eval sets
	// it; a training step does not.
	Tau float64
}

// Trainer trains a draft on batches of windows.
type Trainer struct {
	d   *dgf.Draft
	cfg TrainConfig
	Opt *Optimizer
	rng *rand.Rand

	capRows, maxLen int
	steps           []*dgf.Acts // per unroll step
	g               *dgf.Grads
	df              [2]device.Buffer // gradient of a step's input features, alternating

	// Keys and values of every unroll step, each window's steps side by
	// side, so that step i's attention reads one contiguous range.
	kcat, vcat, dkcat, dvcat []device.Buffer

	tf, logits, tlogits, dlogits, lossV, lossP, agree device.Buffer
	tfSharp                                           device.Buffer // TargetSharpness·tf: its logits are the sharpened ones

	anchor  *dgf.Draft
	aacts   *dgf.Acts
	alogits device.Buffer

	stopped func() bool // StopWhen's; nil: never
}

// SetAnchor sets the draft whose distribution AnchorWeight holds the
// trained one to (nil: none). It must have the trained draft's shape and
// device, and stay unchanged while it is the anchor.
func (t *Trainer) SetAnchor(a *dgf.Draft) error {
	if a != nil && (a.C != t.d.C || a.Dev != t.d.Dev) {
		return errors.New("trainer: the anchor draft has another shape or device")
	}
	t.anchor = a
	if a != nil && t.aacts == nil {
		t.aacts = t.d.NewActs(t.capRows, t.capRows*t.d.C.Heads*t.maxLen, true)
		t.alogits = t.d.Dev.Alloc(t.capRows * t.d.C.Vocab)
	}
	return nil
}

// NewTrainer prepares training of d on batches of at most maxRows
// positions in windows of at most maxLen positions.
func NewTrainer(d *dgf.Draft, cfg TrainConfig, maxRows, maxLen int) (_ *Trainer, err error) {
	defer device.Catch(&err)
	if err := checkShape(cfg, maxRows, maxLen); err != nil {
		return nil, err
	}
	dev, c := d.Dev, d.C
	d.EnableGrad()
	t := &Trainer{d: d, cfg: cfg, Opt: NewOptimizer(d), rng: rand.New(rand.NewPCG(cfg.Seed, 7)), capRows: maxRows, maxLen: maxLen}
	t.allocForward(nil)
	t.g = d.NewGrads(maxRows)
	H, V, KV := c.Hidden, c.Vocab, c.KVDim()
	t.df = [2]device.Buffer{dev.Alloc(maxRows * H), dev.Alloc(maxRows * H)}
	for range c.Blocks {
		t.dkcat = append(t.dkcat, dev.Alloc(cfg.Unroll*maxRows*KV))
		t.dvcat = append(t.dvcat, dev.Alloc(cfg.Unroll*maxRows*KV))
	}
	t.dlogits = dev.Alloc(maxRows * V)
	return t, nil
}

// NewScorer prepares scoring (Eval, EvalDraft; no Step) of tr's draft by
// tr's recipe with unroll steps: it holds no gradients or optimizer state,
// and borrows tr's buffers where the two need the same (step 0's
// activations, the features and logits), since one goroutine runs both.
func NewScorer(tr *Trainer, unroll int) (_ *Trainer, err error) {
	defer device.Catch(&err)
	cfg := tr.cfg
	cfg.Unroll, cfg.AnchorWeight = unroll, 0
	if err := checkShape(cfg, tr.capRows, tr.maxLen); err != nil {
		return nil, err
	}
	t := &Trainer{d: tr.d, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 7)), capRows: tr.capRows, maxLen: tr.maxLen}
	t.allocForward(tr)
	return t, nil
}

func checkShape(cfg TrainConfig, maxRows, maxLen int) error {
	if cfg.Unroll < 1 || cfg.Unroll > 16 {
		return fmt.Errorf("training-time test unroll %d out of range [1, 16]", cfg.Unroll)
	}
	if maxRows < 1 || maxLen < 1 || maxLen > maxRows {
		return fmt.Errorf("trainer: %d rows per batch, windows of %d", maxRows, maxLen)
	}
	return nil
}

// allocForward allocates what the forward pass and the loss need, taking
// from (nil: none) its step 0's activations, the target features and the
// logits instead. A scorer (from set) runs every step in from's step 0
// activations, with attention weights of its own for its deepest step:
// scoring keeps no step for a backward pass.
func (t *Trainer) allocForward(from *Trainer) {
	d, dev, c, cfg, maxRows := t.d, t.d.Dev, t.d.C, t.cfg, t.capRows
	H, V, KV := c.Hidden, c.Vocab, c.KVDim()
	// Attention weights of step i: rows × heads × (i+1)·window.
	probs := func(i int) int { return maxRows * c.Heads * (i + 1) * t.maxLen }
	if from != nil {
		shared := *from.steps[0]
		shared.Blocks = slices.Clone(shared.Blocks)
		for b := range shared.Blocks {
			shared.Blocks[b].Probs = dev.Alloc(probs(cfg.Unroll - 1))
		}
		for range cfg.Unroll {
			t.steps = append(t.steps, &shared)
		}
	} else {
		for i := range cfg.Unroll {
			t.steps = append(t.steps, d.NewActs(maxRows, probs(i), true))
		}
	}
	for range c.Blocks {
		t.kcat = append(t.kcat, dev.Alloc(cfg.Unroll*maxRows*KV))
		t.vcat = append(t.vcat, dev.Alloc(cfg.Unroll*maxRows*KV))
	}
	if from != nil {
		t.tf, t.logits, t.tlogits, t.lossV, t.lossP, t.agree = from.tf, from.logits, from.tlogits, from.lossV, from.lossP, from.agree
		t.tfSharp = from.tfSharp
		return
	}
	t.tf = dev.Alloc(maxRows * H)
	if cfg.TargetSharpness != 0 && cfg.TargetSharpness != 1 {
		t.tfSharp = dev.Alloc(maxRows * H)
	}
	t.logits, t.tlogits = dev.Alloc(maxRows*V), dev.Alloc(maxRows*V)
	t.lossV, t.lossP, t.agree = dev.Alloc(maxRows), dev.Alloc(maxRows), dev.Alloc(maxRows)
}

// Free releases the trainer's buffers (not the draft's, nor those a
// scorer borrowed: free the scorer before the trainer it borrowed from).
func (t *Trainer) Free() {
	dev := t.d.Dev
	scorer := t.Opt == nil // NewScorer's: it owns no optimizer, and borrowed
	if scorer {
		for _, ba := range t.steps[0].Blocks {
			dev.Free(ba.Probs) // its own; the rest is the trainer's
		}
	} else {
		for _, a := range t.steps {
			a.Free(t.d, true)
		}
	}
	bufs := append(append([]device.Buffer{}, t.kcat...), t.vcat...)
	if !scorer {
		bufs = append(bufs, t.tfSharp, t.tf, t.logits, t.tlogits, t.lossV, t.lossP, t.agree, t.df[0], t.df[1], t.dlogits)
		bufs = append(append(bufs, t.dkcat...), t.dvcat...)
		t.g.Free(t.d)
		t.Opt.Free()
	}
	for _, b := range bufs {
		dev.Free(b)
	}
	if t.aacts != nil {
		t.aacts.Free(t.d, true)
		dev.Free(t.alogits)
	}
}

// LearningRate is the schedule at update step (0-based): linear warm-up,
// then cosine decay to a tenth over TotalSteps.
func (c TrainConfig) LearningRate(step int) float32 {
	lr := float64(c.LR)
	if step < c.Warmup {
		return float32(lr * float64(step+1) / float64(c.Warmup))
	}
	if c.TotalSteps <= c.Warmup {
		return float32(lr)
	}
	p := min(1, float64(step-c.Warmup)/float64(c.TotalSteps-c.Warmup))
	return float32(lr * (0.1 + 0.9*0.5*(1+math.Cos(math.Pi*p))))
}

// batch is one batch laid out on the device.
type batch struct {
	lens    []int       // positions per window
	off     []int       // first row of each window
	catOff  []int       // first row of each window in kcat
	n       int         // rows
	masks   [][][]uint8 // [step][window], nil for step 0 (causal)
	tokens  [][]int     // per step
	pos     [][]int     // per step
	probOff [][]int     // [step][window]
}

// layout checks the windows and prepares the device inputs of step 0.
func (t *Trainer) layout(ws []Window, noise bool) (*batch, error) {
	c, K := t.d.C, t.cfg.Unroll
	b := &batch{masks: make([][][]uint8, K), tokens: make([][]int, K), pos: make([][]int, K), probOff: make([][]int, K)}
	for i, w := range ws {
		T := positions(w)
		if T < 1 || len(w.Features) != T+1 {
			return nil, fmt.Errorf("window %d: %d tokens and %d features, want T+1 of each with T ≥ 1", i, len(w.Tokens), len(w.Features))
		}
		for _, f := range w.Features {
			if len(f) != c.Hidden {
				return nil, fmt.Errorf("window %d: a feature of %d values, want %d", i, len(f), c.Hidden)
			}
		}
		for _, tok := range w.Tokens {
			if tok < 0 || tok >= c.Vocab {
				return nil, fmt.Errorf("window %d: token %d outside the vocabulary", i, tok)
			}
		}
		b.lens = append(b.lens, T)
		b.off = append(b.off, b.n)
		b.catOff = append(b.catOff, K*b.n)
		b.n += T
	}
	if b.n == 0 {
		return nil, errors.New("empty batch")
	}
	if b.n > t.capRows || slices.Max(b.lens) > t.maxLen {
		return nil, fmt.Errorf("batch of %d positions in windows of up to %d, the trainer holds %d in windows of up to %d",
			b.n, slices.Max(b.lens), t.capRows, t.maxLen)
	}
	H := c.Hidden
	f, tf := make([]float32, b.n*H), make([]float32, b.n*H)
	for i, w := range ws {
		for p := range b.lens[i] {
			copy(f[(b.off[i]+p)*H:], w.Features[p])
			copy(tf[(b.off[i]+p)*H:], w.Features[p+1])
		}
	}
	if noise && t.cfg.Noise > 0 {
		for i := range f {
			f[i] += t.cfg.Noise * float32(2*t.rng.Float64()-1)
		}
	}
	t.d.Dev.Upload(t.steps[0].F, f)
	t.d.Dev.Upload(t.tf, tf)
	if t.tfSharp != nil {
		// The LM head is linear: logits of s·f are s times f's.
		for i := range tf {
			tf[i] *= t.cfg.TargetSharpness
		}
		t.d.Dev.Upload(t.tfSharp, tf)
	}
	for s := range K {
		po := 0
		for i, w := range ws {
			T := b.lens[i]
			for p := range T {
				// Rows past the end of the window have no target at this
				// step; any token will do, their loss is not counted.
				b.tokens[s] = append(b.tokens[s], w.Tokens[min(p+1+s, T)])
				b.pos[s] = append(b.pos[s], p+s)
			}
			b.probOff[s] = append(b.probOff[s], po)
			po += T * c.Heads * (s + 1) * T
			if s > 0 {
				b.masks[s] = append(b.masks[s], tttMask(T, s))
			}
		}
	}
	return b, nil
}

// tttMask is what row t of unroll step s sees among the keys of steps
// 0..s (T each): step 0's keys up to t (the context, from the target's
// features) and its own row in steps 1..s (its ancestors in a draft tree,
// then itself).
func tttMask(T, s int) []uint8 {
	pend := (s + 1) * T
	m := make([]uint8, T*pend)
	for t := range T {
		row := m[t*pend : (t+1)*pend]
		for k := 0; k <= t; k++ {
			row[k] = 1
		}
		for j := 1; j <= s; j++ {
			row[j*T+t] = 1
		}
	}
	return m
}

// tttAttn is training attention at one unroll step.
type tttAttn struct {
	t    *Trainer
	b    *batch
	step int
}

func (a *tttAttn) shape(w int) device.Attn {
	c := a.t.d.C
	T := a.b.lens[w]
	at := device.Attn{Heads: c.Heads, KVHeads: c.KVHeads, HeadDim: c.HeadDim, Pend: (a.step + 1) * T, Rows: T}
	if a.step > 0 {
		at.Mask = a.b.masks[a.step][w]
	}
	return at
}

// Attend copies this step's keys and values beside the earlier steps'
// (each window's steps side by side), then attends each window over them.
func (a *tttAttn) Attend(blk int, ba *block.Acts) {
	dev, c := a.t.d.Dev, a.t.d.C
	Q, KV := c.QDim(), c.KVDim()
	for w, T := range a.b.lens {
		a.t.check()
		off, cat := a.b.off[w], a.b.catOff[w]
		dev.Copy(dev.View(a.t.kcat[blk], (cat+a.step*T)*KV, T*KV), dev.View(ba.K, off*KV, T*KV))
		dev.Copy(dev.View(a.t.vcat[blk], (cat+a.step*T)*KV, T*KV), dev.View(ba.V, off*KV, T*KV))
		at := a.shape(w)
		dev.Attention(dev.View(ba.Att, off*Q, T*Q), dev.View(ba.Probs, a.b.probOff[a.step][w], T*c.Heads*at.Keys()),
			dev.View(ba.Q, off*Q, T*Q), dev.View(a.t.kcat[blk], cat*KV, at.Keys()*KV), dev.View(a.t.vcat[blk], cat*KV, at.Keys()*KV), at)
	}
}

// AttendBackward adds this step's attention gradients to the keys and
// values of every step it read, then hands on this step's own: later
// steps ran their backward first, so they are complete.
func (a *tttAttn) AttendBackward(blk int, ba *block.Acts, dq, dk, dv, datt device.Buffer) {
	dev, c := a.t.d.Dev, a.t.d.C
	Q, KV := c.QDim(), c.KVDim()
	for w, T := range a.b.lens {
		a.t.check()
		off, cat := a.b.off[w], a.b.catOff[w]
		at := a.shape(w)
		dev.AttentionBackward(dev.View(dq, off*Q, T*Q),
			dev.View(a.t.dkcat[blk], cat*KV, at.Keys()*KV), dev.View(a.t.dvcat[blk], cat*KV, at.Keys()*KV),
			dev.View(datt, off*Q, T*Q), dev.View(ba.Probs, a.b.probOff[a.step][w], T*c.Heads*at.Keys()),
			dev.View(ba.Q, off*Q, T*Q), dev.View(a.t.kcat[blk], cat*KV, at.Keys()*KV), dev.View(a.t.vcat[blk], cat*KV, at.Keys()*KV), at)
		dev.Copy(dev.View(dk, off*KV, T*KV), dev.View(a.t.dkcat[blk], (cat+a.step*T)*KV, T*KV))
		dev.Copy(dev.View(dv, off*KV, T*KV), dev.View(a.t.dvcat[blk], (cat+a.step*T)*KV, T*KV))
	}
}

// run does the forward pass of every unroll step and the loss, and when
// train is set the backward pass (gradients zeroed first). Scoring takes
// each step's loss right after its forward pass, so that the steps can
// share one set of activations (a scorer's). Told to stop (StopWhen), it
// returns ErrStopped, leaving the gradients half computed.
func (t *Trainer) run(ws []Window, train bool) (_ Metrics, _ *batch, err error) {
	defer recoverStop(&err)
	t.check()
	d, dev, c := t.d, t.d.Dev, t.d.C
	H, V := c.Hidden, c.Vocab
	b, err := t.layout(ws, train)
	if err != nil {
		return Metrics{}, nil, err
	}
	n := b.n
	lp := &lossPass{t: t, b: b, train: train, m: Metrics{Positions: n, Top1: make([]float64, t.cfg.Unroll)},
		anchored: t.anchor != nil && t.cfg.AnchorWeight > 0}
	if lp.anchored {
		// The anchor runs step 0 first: its keys land where step 0's will,
		// and step 0's own, which the backward pass reads, overwrite them.
		probs := 0
		for _, T := range b.lens {
			probs += T * c.Heads * T
		}
		av := t.aacts.View(t.d, n, probs, true)
		dev.Copy(av.F, dev.View(t.steps[0].F, 0, n*H))
		t.anchor.Forward(av, b.tokens[0], b.pos[0], &tttAttn{t: t, b: b, step: 0})
		dev.MatMulFrozen(dev.View(t.alogits, 0, n*V), av.Out(), t.anchor.Head, n)
	}
	lp.tf = dev.View(t.tf, 0, n*H)
	lp.tlogits, lp.logits = dev.View(t.tlogits, 0, n*V), dev.View(t.logits, 0, n*V)
	tf := t.tf
	if t.tfSharp != nil {
		tf = t.tfSharp
	}
	// The LM head a window at a time, here and in the loss: with a
	// large vocabulary one product over the batch would take long
	// enough to keep a stopping trainer waiting.
	for w, T := range b.lens {
		t.check()
		off := b.off[w]
		dev.MatMulFrozen(dev.View(lp.tlogits, off*V, T*V), dev.View(tf, off*H, T*H), d.Head, T)
	}
	if train {
		lp.g = t.g.View(d, n)
		lp.dlogits = dev.View(t.dlogits, 0, n*V)
		d.ZeroGrad()
		for blk := range c.Blocks {
			dev.Zero(t.dkcat[blk])
			dev.Zero(t.dvcat[blk])
		}
	}
	steps := make([]*dgf.Acts, t.cfg.Unroll)
	ats := make([]*tttAttn, t.cfg.Unroll)
	for s := range steps {
		t.check()
		probs := 0
		for _, T := range b.lens {
			probs += T * c.Heads * (s + 1) * T
		}
		steps[s] = t.steps[s].View(d, n, probs, true)
		if s > 0 {
			dev.Copy(steps[s].F, steps[s-1].Out())
		}
		ats[s] = &tttAttn{t: t, b: b, step: s}
		d.Forward(steps[s], b.tokens[s], b.pos[s], ats[s])
		if !train {
			lp.loss(s, steps[s])
		}
	}
	if !train {
		lp.m.Tau = chainTau(lp.agreeRows, b)
		return lp.m, b, nil
	}
	var dfNext device.Buffer
	for s := t.cfg.Unroll - 1; s >= 0; s-- {
		t.check()
		a := steps[s]
		if !lp.loss(s, a) {
			continue
		}
		g := lp.g
		// Rows past a window's end at step s have no target: their
		// logits' gradient is zero.
		for w, T := range b.lens {
			t.check()
			off, k := b.off[w], T-s
			if k > 0 {
				dev.MatMulFrozenBackward(dev.View(g.DOut, off*H, k*H), dev.View(lp.dlogits, off*V, k*V), d.Head, k)
			}
		}
		if dfNext != nil {
			dev.Add(g.DOut, g.DOut, dfNext)
		}
		var df device.Buffer
		if s > 0 {
			df = dev.View(t.df[s%2], 0, n*H)
			dev.Zero(df)
		}
		d.Backward(a, g, b.pos[s], ats[s], df)
		dfNext = df
	}
	return lp.m, b, nil
}

// lossPass is the loss of one batch, step by step.
type lossPass struct {
	t        *Trainer
	b        *batch
	train    bool
	anchored bool
	m        Metrics
	g        *dgf.Grads // train: the batch's gradient views
	// The batch's target features, and the logits of the target, of the
	// step being scored and (train) their gradient.
	tf, tlogits, logits, dlogits device.Buffer
	agreeRows                    [][]float32 // scoring: per step, per row
}

// loss adds step s's loss on its predicted features a.Out() to p.m and,
// when training, leaves its gradient in p.g.dout (before the LM head's
// backward: that of the logits in p.dlogits). It reports whether the step
// had any position with a target.
func (p *lossPass) loss(s int, a *dgf.Acts) bool {
	t, b, dev, c := p.t, p.b, p.t.d.Dev, p.t.d.C
	H, V, n := c.Hidden, c.Vocab, b.n
	valid := 0
	for _, T := range b.lens {
		valid += max(0, T-s)
	}
	if valid == 0 {
		return false
	}
	w := float32(math.Pow(float64(t.cfg.Decay), float64(s)))
	scaleV := w * t.cfg.FeatureWeight / float32(valid)
	scaleP := w * t.cfg.ProbWeight / float32(valid)
	if p.train {
		dev.Zero(p.dlogits)
		dev.Zero(p.g.DOut)
	}
	var sumV, sumP, sumA, hits float64
	for wi, T := range b.lens {
		k := T - s
		if k <= 0 {
			continue
		}
		t.check()
		off := b.off[wi]
		dev.MatMulFrozen(dev.View(p.logits, off*V, k*V), dev.View(a.Out(), off*H, k*H), t.d.Head, k)
		var dp, dl device.Buffer
		if p.train {
			dp, dl = dev.View(p.g.DOut, off*H, k*H), dev.View(p.dlogits, off*V, k*V)
		}
		lv, lp, ag := dev.View(t.lossV, off, k), dev.View(t.lossP, off, k), dev.View(t.agree, off, k)
		dev.SmoothL1(dp, lv, dev.View(a.Out(), off*H, k*H), dev.View(p.tf, (off+s)*H, k*H), k, H, scaleV)
		dev.SoftCrossEntropy(dl, lp, ag, dev.View(p.logits, off*V, k*V), dev.View(p.tlogits, (off+s)*V, k*V), k, V, scaleP)
		sumV += dev.Sum(lv)
		sumP += dev.Sum(lp)
		hits += dev.Sum(ag)
		if p.anchored && s == 0 {
			dev.SoftCrossEntropy(dl, lp, nil, dev.View(p.logits, off*V, k*V), dev.View(t.alogits, off*V, k*V), k, V, t.cfg.AnchorWeight/float32(valid))
			sumA += dev.Sum(lp)
		}
	}
	if !p.train {
		// Per-row agreement, for the simulated chain τ (scoring only: a
		// training step does not pay for the download). Rows whose every
		// step has a target were all written at every step.
		if p.agreeRows == nil {
			p.agreeRows = make([][]float32, t.cfg.Unroll)
		}
		p.agreeRows[s] = make([]float32, n)
		dev.Download(p.agreeRows[s], dev.View(t.agree, 0, n))
	}
	// The scales as rounded for the device, so that Loss is exactly what
	// the gradients differentiate.
	p.m.Loss += float64(scaleV)*sumV + float64(scaleP)*sumP + float64(t.cfg.AnchorWeight/float32(valid))*sumA
	p.m.Top1[s] = hits / float64(valid)
	if s == 0 {
		p.m.FeatLoss, p.m.ProbLoss = sumV/float64(valid), sumP/float64(valid)
	}
	return true
}

// chainTau is Metrics.Tau from each step's per-row agreement.
func chainTau(agree [][]float32, b *batch) float64 {
	U := len(agree)
	var sum float64
	count := 0
	for w, T := range b.lens {
		for p := range T - (U - 1) {
			run := 0
			for run < U && agree[run] != nil && agree[run][b.off[w]+p] > 0.5 {
				run++
			}
			sum += float64(run)
			count++
		}
	}
	if count == 0 {
		return 0
	}
	return 1 + sum/float64(count)
}

// Step trains on one batch: forward, loss, backward, clipping and one
// AdamW update at the scheduled learning rate.
func (t *Trainer) Step(ws []Window) (Metrics, error) {
	if t.Opt == nil {
		return Metrics{}, errors.New("trainer: a scorer does not train")
	}
	m, _, err := t.run(ws, true)
	if err != nil {
		return m, err
	}
	cfg := t.cfg
	m.GradNorm = t.Opt.Update(cfg.LearningRate(t.Opt.Step), cfg.Beta1, cfg.Beta2, cfg.Eps, cfg.WeightDecay, cfg.Clip)
	return m, nil
}

// Eval measures loss and agreement on windows without training.
func (t *Trainer) Eval(ws []Window) (Metrics, error) {
	m, _, err := t.run(ws, false)
	return m, err
}

// EvalDraft measures another draft of the same shape and device on
// windows, with this trainer's buffers and recipe: how a trainer compares
// its draft with the one in use.
func (t *Trainer) EvalDraft(d *dgf.Draft, ws []Window) (Metrics, error) {
	if d.C != t.d.C || d.Dev != t.d.Dev {
		return Metrics{}, errors.New("trainer: evaluating a draft of another shape or device")
	}
	own := t.d
	t.d = d
	defer func() { t.d = own }()
	return t.Eval(ws)
}
