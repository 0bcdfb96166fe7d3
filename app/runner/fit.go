package runner

import (
	"fmt"
	"slices"
	"time"

	"gonum.org/v1/gonum/stat"

	"dovetail/app/runner/probe"
	"dovetail/app/runner/store"
	"dovetail/cpu"
	"dovetail/engine/plan"
	"dovetail/engine/tree"
	"dovetail/models"
	"dovetail/models/draft"
	"dovetail/offload"
	"dovetail/train"
)

// Placement is where a model's work runs.
type Placement struct {
	Threads int `json:"threads"`
	// DraftDevice and TrainerDevice are "cpu", a GPU's name, or "none".
	DraftDevice   string      `json:"draft_device"`
	TrainerDevice string      `json:"trainer_device"`
	GPULayers     int         `json:"gpu_layers"`
	Ctx           int         `json:"ctx"`
	Tree          tree.Params `json:"tree"`
	// Device is the draft's device as an option (cpu, cuda:N).
	Device string `json:"device"`
}

// Prediction is a model's predicted decode speed, tokens/s: the target
// alone, with its draft as it is today (or at the acceptance asked for),
// and a range for the draft's acceptance.
type Prediction struct {
	Plain     float64 `json:"plain_tokens_per_s"`
	WithDraft float64 `json:"tokens_per_s"`
	Low       float64 `json:"low"`
	High      float64 `json:"high"`
	// Tau is the tokens per round the prediction assumes.
	Tau float64 `json:"tau"`
	// TauLow and TauHigh are the τ asked for (FitOptions.Tau), which Low
	// and High are at and WithDraft at the middle of; 0: the draft's
	// history or the prior.
	TauLow  float64 `json:"assumed_tau_low,omitempty"`
	TauHigh float64 `json:"assumed_tau_high,omitempty"`
	// CPUOnly is the target alone with every layer on the CPU, and the
	// speedups the speeds above over it.
	CPUOnly      float64 `json:"cpu_only_tokens_per_s"`
	SpeedupPlain float64 `json:"speedup_plain"`
	Speedup      float64 `json:"speedup"`
	SpeedupLow   float64 `json:"speedup_low"`
	SpeedupHigh  float64 `json:"speedup_high"`
	// StepMs is the predicted T_T of the placement's target (with layers
	// on a GPU, the split's), before a run's own costs.
	StepMs float64 `json:"step_ms"`
}

// FitOptions is what a fit is asked beyond the machine.
type FitOptions struct {
	// GPULayers is how many of the target's last layers go to the GPU, as
	// --gpu-layers: GPULayersAuto as many as fit, else at most that many.
	GPULayers int
	// Tau, when set, is the draft's acceptance the prediction assumes in
	// place of its history or the prior: a low and a high τ (tokens per
	// round), 1 < low ≤ high (ParseTau).
	Tau []float64
}

// Verdicts of a fit.
const (
	FitsGPU    = "all on GPU"
	FitsPartly = "partly on GPU"
	FitsCPU    = "CPU only"
	NoFit      = "will not fit"
)

// Fit is how a model fits this machine.
type Fit struct {
	Model     string     `json:"model"`
	Path      string     `json:"path"`
	Placement Placement  `json:"placement"`
	Budget    Budget     `json:"-"`
	Verdict   string     `json:"fit"`
	Reason    string     `json:"reason"`
	Predicted Prediction `json:"predicted"`
	// GPUs is the arithmetic of the placement on each GPU planned for.
	GPUs []GPUPlan `json:"gpu_arithmetic,omitempty"`
}

// minCtx is the smallest context a fit shrinks to before it gives up.
const minCtx = 512

// maxDefaultCtx caps the context a fit chooses: the cache of a long one
// costs memory most requests never use.
const maxDefaultCtx = 8192

// PlanFit places m on the machine the probe describes: threads on the
// physical cores, the longest context (up to maxDefaultCtx) whose cache
// fits, the draft and its trainer on a GPU with room for them and a head
// large enough to gain, else on the CPU, without its trainer, or not at
// all, as memory allows; and predicts the speed from cal (nil: no speeds).
func PlanFit(m *Model, machine probe.Report, cal *Calibration, st *store.Store) Fit {
	return PlanFitWith(m, machine, cal, st, FitOptions{GPULayers: GPULayersAuto})
}

// PlanFitWith is PlanFit as o asks: a number of the target's layers on
// the GPU, an acceptance to predict at. With layers on the GPU the
// prediction is of the split (splitProfile), at the GPU's memory bandwidth.
func PlanFitWith(m *Model, machine probe.Report, cal *Calibration, st *store.Store, o FitOptions) Fit {
	f := Fit{Model: m.Name, Path: m.Path}
	threads := max(1, machine.CPU.Cores)
	ctx := min(m.Config().ContextLength, maxDefaultCtx)
	avail := machine.Memory.AvailableBytes
	var b Budget
	for {
		b = targetBudget(m, ctx, threads, avail)
		if b.fits() || ctx <= minCtx {
			break
		}
		ctx = max(ctx/2, min(minCtx, m.Config().ContextLength))
	}
	f.Placement = Placement{Threads: threads, Ctx: ctx, DraftDevice: "none", TrainerDevice: "none", Device: "cpu"}
	if !b.fits() {
		f.Budget, f.Verdict = b, NoFit
		f.Reason = fmt.Sprintf("the weights and a cache of %d positions need %s; %s is available", ctx, HumanBytes(b.CPU()), HumanBytes(avail))
		return f
	}
	ad := autoDraftOf(m, st)
	f.Budget, f.Verdict, f.Reason = fitDraft(&f.Placement, b, m, ad, machine, o.GPULayers)
	fitLayers(&f, m, machine, o.GPULayers, ad.cfg.Kind != draft.EAGLE3)
	f.Placement.Tree = tree.Server
	ask := predictAsk{m: m.Llama, tau: o.Tau}
	if len(machine.GPUs) > 0 {
		ask.gpu = gpuSpeedOf(machine.GPUs[0])
	}
	var shape tree.Params
	if f.Predicted, shape = predict(cal, f.Placement, ad, ask); shape != (tree.Params{}) {
		f.Placement.Tree = shape
	}
	return f
}

// targetBudget counts the target at ctx.
func targetBudget(m *Model, ctx, threads int, avail uint64) Budget {
	fp := cpu.MeasureTarget(m.Llama, ctx, threads)
	b := Budget{Available: avail}
	b.add("weights", "cpu", fp.Weights)
	b.add("rope table", "cpu", fp.Tables)
	b.add("kv cache", "cpu", fp.KV)
	b.add("scratch", "cpu", fp.Scratch)
	return b
}

// fitDraft places the draft beside the target as runner.New would on
// the machine the probe describes, and says how it fits.
func fitDraft(p *Placement, b Budget, m *Model, ad autoDraft, machine probe.Report, want int) (Budget, string, string) {
	cfg := ad.cfg
	a := DefaultAdapt()
	q := draftRequest{base: b, cfg: cfg, m: m.Llama, ctx: p.Ctx, seqs: 1, hostBytes: a.Engine.HostBytes(), needLearn: ad.ck == nil && !ad.pulled,
		learn: &train.Learn{Config: trainConfig(a, true), MaxRows: learnRows(a.Engine), MaxLen: learnLen(a.Engine), EvalDepth: learnDepth}}
	if cfg.Kind == draft.EAGLE3 {
		q.learn = nil // it never trains (openEAGLE)
	}
	why := "no NVIDIA GPU"
	if len(machine.GPUs) > 0 {
		g := machine.GPUs[0]
		q.room = &gpuRoom{name: g.Name, free: g.VRAMFreeBytes}
		q.layers = askLayers(m.Llama, p.Ctx, 1, layersAsked(m.Llama, want))
		why = g.Name + " is not used"
		if cfg.Hidden*cfg.Vocab < gpuMinHead {
			why = "the draft is too small to gain from " + g.Name
		}
	}
	pl, ok, err := placeDraft(q)
	switch {
	case err != nil:
		return b, FitsCPU, err.Error()
	case !ok:
		return b, FitsCPU, "no draft fits in memory beside the target: the target alone on the CPU"
	}
	p.DraftDevice = side(pl.draftGPU, q.room)
	if pl.draftGPU {
		p.Device = "cuda:0"
	}
	if pl.learn {
		p.TrainerDevice = side(pl.trainGPU, q.room)
	}
	if pl.draftGPU {
		return pl.budget, FitsPartly, fmt.Sprintf("the draft on %s, %s", p.DraftDevice, trainerOn(p.TrainerDevice))
	}
	if n := placeNotice(pl, true, q.room, cfg.Hidden*cfg.Vocab >= gpuMinHead); n != "" {
		why = n
	}
	return pl.budget, FitsCPU, fmt.Sprintf("%s; the draft on the CPU, %s", why, trainerOn(p.TrainerDevice))
}

// trainerOn says where the trainer runs, in words: "cpu" is the CPU.
func trainerOn(device string) string {
	switch device {
	case "none":
		return "no trainer"
	case "cpu":
		return "its trainer on the CPU"
	}
	return "its trainer on " + device
}

// fitLayers puts as many of the target's last layers on the first GPU as
// fit beside what f already placed there, at most want of them, as
// --gpu-layers would, and says so in front of f's reason. A draft on that
// GPU that reads the target's LM head (draftHead) lends the layers its
// copy.
func fitLayers(f *Fit, m *Model, machine probe.Report, want int, draftHead bool) {
	if len(machine.GPUs) == 0 || f.Verdict == NoFit {
		return
	}
	g, L := machine.GPUs[0], m.Config().Layers
	onCPU := func(why string) {
		f.Reason = fmt.Sprintf("the target on the CPU (%s); %s", why, f.Reason)
		f.GPUs = []GPUPlan{{Device: g.Name, FreeBytes: g.VRAMFreeBytes, ReserveBytes: gpuReserve,
			DraftBytes: f.Budget.gpuPart("draft"), TrainerBytes: f.Budget.gpuPart("trainer"),
			LeftBytes: gpuAvail(g.VRAMFreeBytes, f.Budget), Stop: why, BandwidthGBs: g.MemoryBandwidthGBs}}
	}
	if err := offload.Check(m.Llama); err != nil {
		onCPU(err.Error())
		return
	}
	if lb := layerBytes(m.Llama); lb < gpuMinLayerBytes {
		onCPU(fmt.Sprintf("its layers, %s each, run faster there", HumanBytes(lb)))
		return
	}
	a, err := measureLayers(m.Llama, f.Placement.Ctx, 1)
	if err != nil {
		onCPU(err.Error())
		return
	}
	if draftHead && f.Placement.DraftDevice == g.Name {
		a.lendHead(m.Llama)
	}
	avail := gpuAvail(g.VRAMFreeBytes, f.Budget)
	most := layersAsked(m.Llama, want)
	k, bytes := a.fit(avail, most)
	f.GPUs = []GPUPlan{*a.plan(g.Name, g.VRAMFreeBytes, f.Budget, k, avail, most)}
	f.GPUs[0].BandwidthGBs = g.MemoryBandwidthGBs
	if most == 0 {
		f.Reason = fmt.Sprintf("the target on the CPU (--gpu-layers 0); %s", f.Reason)
		return
	}
	if k == 0 {
		f.Reason = fmt.Sprintf("the target on the CPU (no room for its layers on %s); %s", g.Name, f.Reason)
		return
	}
	f.Placement.GPULayers = k
	f.Budget.add("target layers", g.Name, bytes)
	f.Budget.take("weights", offloadedFileBytes(m.Llama, L-k))
	f.Budget.take("kv cache", cpuKVBytes(m.Llama, f.Placement.Ctx, 1, k))
	f.Verdict = FitsPartly
	if k == L && f.Placement.DraftDevice == g.Name {
		f.Verdict = FitsGPU
	}
	if k == L {
		f.Reason = fmt.Sprintf("all %d of the target's layers on %s; %s", L, g.Name, f.Reason)
		return
	}
	f.Reason = fmt.Sprintf("the target's last %d of %d layers on %s, the rest on the CPU; %s", k, L, g.Name, f.Reason)
}

// savedDraftOf is the draft --draft auto would load for m (nil: none).
func savedDraftOf(m *Model, st *store.Store) *draft.Checkpoint {
	r := &Runner{model: m, store: st, opts: Options{Notify: func(Notice) {}}}
	ck, _ := r.savedDraft(false)
	return ck
}

// predictAsk is what a prediction assumes beside the calibration.
type predictAsk struct {
	m   *models.Llama // the target, whose bytes split its costs (nil: no split)
	gpu *gpuSpeed     // the GPU the placement uses (nil: none, or its speed unknown)
	tau []float64     // the low and high τ asked for (nil: none)
}

// predict is the speed of the placement from the calibration: the target
// alone, and with the draft at the acceptance its saved τ history says
// (median, and 10th to 90th percentile), or, without one, a prior (half,
// between a quarter and three quarters; none for a new draft, which
// learns from the first requests), widened by the spread of the
// calibration's runs, down to a new draft's measured speed; or with the
// tree it predicts best accepting the τ asked for (alphaRealizing); and
// that tree. Layers on a GPU cost what
// splitProfile says, a draft on a GPU no calibration timed gpuDraftStep.
func predict(cal *Calibration, p Placement, ad autoDraft, ask predictAsk) (Prediction, tree.Params) {
	if cal == nil || cal.Profile.Decode <= 0 {
		return Prediction{}, tree.Params{}
	}
	prof := cal.Profile
	if ask.m != nil && ask.gpu != nil {
		prof = splitProfile(cal.Profile, ask.m, p.GPULayers, *ask.gpu)
	}
	pl := plan.New(prof, tree.Server.TopK)
	// A run decodes slower than the bare forward the profile times: every
	// cost scales by the ratio, as the planner scales its profile live.
	scale := 1.0
	if cal.Plain > 0 {
		scale = cal.Plain * cal.Profile.Decode.Seconds()
	}
	plain := scale / prof.Decode.Seconds()
	// The calibration's runs spread: the range carries their slowest and
	// fastest, as ratios to their median.
	slow, fast := spread(cal)
	asked := len(ask.tau) == 2
	if asked {
		slow, fast = 1, 1 // the range is the τ asked for's
	}
	out := Prediction{Plain: plain, WithDraft: plain, Low: slow * plain, High: fast * plain, Tau: 1,
		CPUOnly: scale / cal.Profile.Decode.Seconds(), StepMs: float64(prof.Decode.Microseconds()) / 1e3}
	if asked {
		out.TauLow, out.TauHigh = ask.tau[0], ask.tau[1]
	}
	step, ok := cal.DraftStep[p.Device]
	if !ok && p.Device != "cpu" && ask.m != nil && ask.gpu != nil {
		step, ok = gpuDraftStep(ad.cfg, ask.m, *ask.gpu), true
	}
	if p.DraftDevice == "none" || !ok {
		out.speedups()
		return out, tree.Params{}
	}
	lo, mid, hi := draftAlphas(ad)
	if asked {
		lo, mid, hi = alphaRealizing(pl, ask.tau[0], step), alphaRealizing(pl, (ask.tau[0]+ask.tau[1])/2, step), alphaRealizing(pl, ask.tau[1], step)
	}
	var shape tree.Params
	shape, out.WithDraft = pl.Predict(mid, step)
	_, out.Low = pl.Predict(lo, step)
	_, out.High = pl.Predict(hi, step)
	out.WithDraft, out.Low, out.High = scale*out.WithDraft, scale*slow*out.Low, scale*fast*out.High
	if !asked {
		// Probes keep acceptance measured while drafting is off: a few
		// percent of the time. Before the draft learns, its first
		// rounds, probes and reading every token cost what calibration
		// measured with a new draft on the CPU: the low end where one
		// runs there.
		out.Low = max(out.Low, 0.95*slow*plain)
		if p.Device == "cpu" && cal.DraftedLow > 0 {
			out.Low = min(out.Low, cal.DraftedLow)
		}
	}
	out.Tau = shapeTau(shape, mid)
	out.speedups()
	return out, shape
}

// draftAlphas is the per-depth acceptance a prediction's low end, middle
// and high end assume: from the saved draft's τ history, else a prior.
func draftAlphas(ad autoDraft) (lo, mid, hi float64) {
	depth := tree.Server.Depth + 1
	lo, mid, hi = 0.25, 0.5, 0.75
	ck := ad.ck
	if ck == nil && !ad.pulled {
		// A new draft proposes what it has not learnt: until it has,
		// the planner keeps drafting off (the target alone's speed);
		// the high end is what learning may bring. A published EAGLE
		// draft was trained: the prior.
		lo, mid = 0, 0
	}
	if h := tauHistory(ck); len(h) > 0 {
		lo = plan.AlphaForTau(stat.Quantile(0.1, stat.Empirical, h, nil), depth)
		mid = plan.AlphaForTau(stat.Quantile(0.5, stat.Empirical, h, nil), depth)
		hi = plan.AlphaForTau(stat.Quantile(0.9, stat.Empirical, h, nil), depth)
	}
	return lo, mid, hi
}

// alphaRealizing is the per-depth acceptance at which the tree pl predicts
// best for a draft step of step accepts tau tokens a round. A τ asked for
// is what rounds accept, whatever their shape, as the Dovetail paper's
// acceptance lengths are: the acceptance that gives it along the
// server's tree would give fewer along the shallower tree the planner
// prefers where verification is dear.
func alphaRealizing(pl *plan.Planner, tau float64, step time.Duration) float64 {
	lo, hi := 0.0, 1.0
	for range 40 {
		a := (lo + hi) / 2
		if shape, _ := pl.Predict(a, step); shapeTau(shape, a) < tau {
			lo = a
		} else {
			hi = a
		}
	}
	return hi
}

// shapeTau is the tokens a round of shape accepts at a per-depth
// acceptance alpha: 1 + α + … along its depth (1 for no draft).
func shapeTau(shape tree.Params, alpha float64) float64 {
	if shape == (tree.Params{}) {
		return 1
	}
	t, r := 1.0, 1.0
	for range min(shape.Depth+1, shape.Tokens) {
		r *= alpha
		t += r
	}
	return t
}

// speedups fills in the speeds over the target alone on the CPU.
func (p *Prediction) speedups() {
	if p.CPUOnly <= 0 {
		return
	}
	p.SpeedupPlain, p.Speedup = p.Plain/p.CPUOnly, p.WithDraft/p.CPUOnly
	p.SpeedupLow, p.SpeedupHigh = p.Low/p.CPUOnly, p.High/p.CPUOnly
}

// spread is the slowest and fastest of a calibration's plain runs over
// their median (1, 1 when it kept none).
func spread(cal *Calibration) (slow, fast float64) {
	if cal.Plain <= 0 || cal.PlainLow <= 0 || cal.PlainHigh <= 0 {
		return 1, 1
	}
	return min(cal.PlainLow/cal.Plain, 1), max(cal.PlainHigh/cal.Plain, 1)
}

// tauHistory is the τ a saved draft measured at each publication,
// sorted.
func tauHistory(ck *draft.Checkpoint) []float64 {
	if ck == nil {
		return nil
	}
	h := store.ParseFloats(ck.Meta[store.MetaTauHistory])
	slices.Sort(h)
	return h
}
