package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"dovetail/assets"
	"dovetail/cpu"
	"dovetail/engine"
	"dovetail/gpu"
	"dovetail/models/draft"
)

// DraftInfo says which drafter runs and how.
type DraftInfo struct {
	// Name is "none", "ngram", "model:PATH", "dgf:WHERE" (WHERE: the
	// file, "embedded:NAME" or "untrained"), or "custom".
	Name   string
	Device string // where a DGF draft runs ("" for other drafters)
	Adapt  engine.AdaptMode
}

// drafting is what the runner built for drafting: a drafter per slot and
// what frees them.
type drafting struct {
	info     DraftInfo
	drafters []engine.Drafter
	adaptive *adaptive
	closers  []func() error // run in order by close
}

func (d *drafting) close() error {
	var errs []error
	for _, c := range d.closers {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// openDrafting builds the drafters Options.Draft names, one per slot, and
// adds what they take to the budget. A DGF draft with its trainer that
// would not fit in memory runs without the trainer, and one that would
// not fit at all is not used: both with a notice.
func (r *Runner) openDrafting() (*drafting, error) {
	o := r.opts
	d := &drafting{info: DraftInfo{Name: "none", Adapt: engine.AdaptOff}}
	if o.NewDrafter != nil {
		d.info.Name = "custom"
		// A drafter that holds something (an io.Closer) is closed with the
		// runner.
		d.closers = append(d.closers, func() error {
			var errs []error
			for _, dr := range d.drafters {
				if c, ok := dr.(io.Closer); ok {
					errs = append(errs, c.Close())
				}
			}
			return errors.Join(errs...)
		})
		for i := range r.slots {
			dr, err := o.NewDrafter(i)
			if err != nil {
				d.close()
				return nil, fmt.Errorf("slot %d: %w", i, err)
			}
			d.drafters = append(d.drafters, dr)
		}
		return d, nil
	}
	kind, arg, _ := strings.Cut(o.Draft, ":")
	switch kind {
	case "none":
		return d, nil
	case "ngram":
		d.info.Name = "ngram"
		for range r.slots {
			d.drafters = append(d.drafters, &engine.NgramDrafter{})
		}
		return d, nil
	case "model":
		return d, r.openModelDrafter(d, arg)
	}
	ck, where, err := r.dgfCheckpoint()
	if err != nil {
		return nil, err
	}
	mode := o.Adapt.Mode
	switch {
	case ck == nil && kind == "scratch" && mode == engine.AdaptOff:
		return nil, errors.New("a new draft (scratch) learns only with adaptation on")
	case ck == nil && kind != "scratch" && mode != engine.AdaptBackground:
		return d, nil // auto, and nothing to draft with
	}
	return d, r.openDGF(d, ck, where)
}

// openModelDrafter drafts with a smaller model of the same vocabulary,
// one sequence per slot over one packed copy of its weights.
func (r *Runner) openModelDrafter(d *drafting, path string) error {
	dm, err := OpenModel(path)
	if err != nil {
		return fmt.Errorf("draft model: %w", err)
	}
	if err := SameVocab(r.model, dm); err != nil {
		dm.Close()
		return fmt.Errorf("draft model %s cannot draft for %s: %w", path, r.model.Name, err)
	}
	fp := cpu.MeasureTarget(dm.Llama, r.ctx, r.per)
	b := r.budget
	b.add("draft model", "cpu", fp.Weights+fp.Tables+uint64(len(r.slots))*(fp.KV+fp.Scratch))
	if !b.fits() {
		dm.Close()
		return &MemoryError{Budget: b, Hint: "choose a smaller draft model or --draft ngram"}
	}
	r.budget = b
	f := cpu.NewFast(dm.Llama, cpu.DefaultKernels(), r.slots[0].pool, r.ctx)
	for _, s := range r.slots {
		d.drafters = append(d.drafters, engine.NewModelDrafter(cpu.NewTargetWith(f.WithPool(s.pool))))
	}
	d.info.Name = "model:" + path
	d.closers = append(d.closers, dm.Close)
	return nil
}

// dgfCheckpoint resolves a DGF draft for the target: auto (the saved or
// shipped draft, nil when there is none), dgf:PATH, or scratch (nil). It
// refuses a draft made for another model.
func (r *Runner) dgfCheckpoint() (*draft.Checkpoint, string, error) {
	kind, arg, _ := strings.Cut(r.opts.Draft, ":")
	var ck *draft.Checkpoint
	where := kind
	switch kind {
	case "", "auto":
		ck, where = r.savedDraft()
	case "dgf":
		var err error
		if ck, err = draft.Load(arg); err != nil {
			return nil, "", err
		}
		where = arg
	}
	if ck != nil {
		if err := ck.CheckTarget(r.model.Fingerprint, r.model.Name); err != nil {
			return nil, "", fmt.Errorf("draft %s: %w", where, err)
		}
	}
	return ck, where, nil
}

// savedDraft finds the DGF draft of the target for auto: the one
// adaptation or an install saved in the store under the target's
// fingerprint, else the draft shipped with the embedded model when the
// target is that model; nil when there is none. A saved draft that does
// not load is a notice.
func (r *Runner) savedDraft() (*draft.Checkpoint, string) {
	fp := r.model.Fingerprint
	if r.store != nil {
		path := r.store.DraftPath(fp)
		ck, err := draft.Load(path)
		if err == nil {
			err = ck.CheckTarget(fp, r.model.Name)
		}
		switch {
		case err == nil:
			return ck, path
		case !errors.Is(err, fs.ErrNotExist):
			r.notify(Notice{Warning: true, Text: fmt.Sprintf("ignoring the saved draft: %v", err)})
		}
	}
	if assets.DefaultDraft == nil {
		return nil, ""
	}
	ck, err := draft.Parse("embedded:"+assets.DefaultDraftName, assets.DefaultDraft)
	if err != nil || ck.Fingerprint != fp {
		return nil, ""
	}
	return ck, "embedded:" + assets.DefaultDraftName
}

// openDGF runs a DGF draft (ck nil: a new one) on the device the options
// name, adapting unless adaptation is off, within the memory budget.
func (r *Runner) openDGF(d *drafting, ck *draft.Checkpoint, where string) error {
	o := r.opts
	cfg := draft.ForTarget(r.model.Config(), 1, 0)
	if ck != nil {
		cfg = ck.Config
	}
	adapt := o.Adapt.Mode != engine.AdaptOff
	measure := func(onGPU, learn bool) (gpu.Footprint, error) {
		var l *gpu.Learn
		if learn {
			c := o.Adapt.Engine
			l = &gpu.Learn{Config: trainConfig(o.Adapt, o.Greedy), MaxRows: learnRows(c), MaxLen: learnLen(c), EvalDepth: learnDepth}
		}
		return gpu.Measure(cfg, r.model.Llama, onGPU, r.ctx, len(r.slots), l, onGPU)
	}
	need := func(onGPU bool) uint64 {
		fp, err := measure(onGPU, adapt)
		if err != nil {
			return ^uint64(0)
		}
		return fp.Draft + fp.Trainer
	}
	devs, err := openDraftDevices(o.Device, cfg, r.per, o.Adapt.Threads, need, r.notify)
	if err != nil {
		return err
	}
	b, err := r.dgfBudget(devs, measure, adapt)
	if err != nil {
		devs.close()
		return err
	}
	if adapt && !b.fits() {
		if ck == nil {
			devs.close()
			r.notify(Notice{Warning: true, Text: fmt.Sprintf("no draft: a new one needs its trainer, and %s does not fit in %s", b, HumanBytes(b.Available))})
			return nil
		}
		adapt = false
		if b, err = r.dgfBudget(devs, measure, false); err != nil {
			devs.close()
			return err
		}
		r.notify(Notice{Warning: true, Text: "adaptation off: the draft's trainer does not fit in the memory available"})
	}
	if !b.fits() {
		devs.close()
		r.notify(Notice{Warning: true, Text: fmt.Sprintf("drafting off: the draft does not fit in the memory available (%s)", b)})
		return nil
	}
	r.budget = b
	return r.startDGF(d, devs, cfg, ck, where, adapt)
}

// dgfBudget is the runner's budget with a DGF draft placed on devs.
func (r *Runner) dgfBudget(devs draftDevices, measure func(onGPU, learn bool) (gpu.Footprint, error), adapt bool) (Budget, error) {
	fp, err := measure(devs.onGPU, adapt)
	if err != nil {
		return Budget{}, err
	}
	b := r.budget
	b.add("draft", deviceLabel(devs.drafter), fp.Draft)
	if adapt {
		b.add("trainer", deviceLabel(devs.trainer), fp.Trainer)
		b.add("adaptation", "cpu", r.opts.Adapt.Engine.HostBytes())
	}
	if devs.onGPU {
		b.GPUFree, _ = devs.drafter.MemInfo()
		if b.GPU() > b.GPUFree {
			return b, fmt.Errorf("%s has %s free; the draft needs %s (%s)", devs.drafter.Name(), HumanBytes(b.GPUFree), HumanBytes(b.GPU()), b)
		}
	}
	return b, nil
}

// deviceLabel is "cpu" for the host, else the GPU's name.
func deviceLabel(d gpu.Device) string {
	if gpu.OnHost(d) {
		return "cpu"
	}
	return d.Name()
}

// startDGF allocates the draft and its sequences (and its adaptation).
func (r *Runner) startDGF(d *drafting, devs draftDevices, cfg draft.Config, ck *draft.Checkpoint, where string, adapt bool) error {
	o := r.opts
	dr, err := gpu.NewDraft(devs.drafter, cfg, r.model.Llama)
	if err != nil {
		devs.close()
		return fmt.Errorf("draft %s: %w", where, err)
	}
	if ck != nil {
		if err := dr.Load(ck); err != nil {
			dr.Free()
			devs.close()
			return fmt.Errorf("draft %s: %w", where, err)
		}
	}
	d.info = DraftInfo{Name: "dgf:" + where, Device: devs.drafter.Name(), Adapt: engine.AdaptOff}
	if adapt {
		a := o.Adapt
		ad, err := startAdaptive(dr, ck, where, r.model, devs.trainer, r.ctx, len(r.slots), o.Greedy, a, r.store, r.notify)
		if err != nil {
			devs.close()
			return err
		}
		if ck == nil {
			d.info.Name = "dgf:untrained"
		}
		d.info.Adapt, d.adaptive = a.Mode, ad
		for _, x := range ad.drafters {
			d.drafters = append(d.drafters, x)
		}
		d.closers = append(d.closers, ad.close, func() error { devs.close(); return nil })
		return nil
	}
	if err := dr.FreezeForDrafting(); err != nil {
		dr.Free()
		devs.close()
		return fmt.Errorf("draft %s: %w", where, err)
	}
	var seqs []*gpu.Sequence
	for range r.slots {
		seq := dr.NewSequence(r.ctx)
		seqs = append(seqs, seq)
		dd := engine.NewDGFDrafter(seq)
		if o.Greedy {
			dd.Sharpness = greedySharpness
		}
		d.drafters = append(d.drafters, dd)
	}
	d.closers = append(d.closers, func() error {
		for _, s := range seqs {
			s.Free()
		}
		dr.Free()
		devs.close()
		return nil
	})
	return nil
}
