package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"

	"dovetail/app/runner/store"
	"dovetail/assets"
	"dovetail/cpu"
	"dovetail/device"
	"dovetail/device/cuda"
	"dovetail/dgf"
	"dovetail/engine"
	"dovetail/engine/adapt"
	"dovetail/engine/drafters"
	"dovetail/models/draft"
	"dovetail/train"
)

// DraftInfo says which drafter runs and how.
type DraftInfo struct {
	// Name is "none", "ngram", "model:PATH", "dgf:WHERE" (WHERE: the
	// file, "embedded:NAME" or "untrained"), or "custom".
	Name   string
	Device string // where a DGF draft runs ("" for other drafters)
	// Trainer is where an adapting draft's trainer runs ("": none).
	Trainer string
	Adapt   adapt.Mode
}

// drafting is what the runner built for drafting: a drafter per slot and
// what frees them.
type drafting struct {
	info     DraftInfo
	drafters []engine.Drafter
	adaptive *adaptive
	closers  []func() error // run in order by close
	dayZero  *dayZero       // a new draft starting in the background (nil: none)
	// head is the draft's copy of the target's LM head on a GPU (nil:
	// none), which the target's layers there use too (sharedHead).
	head    device.Matrix
	headDev device.Device
}

// keepHead notes dr's copy of the target's LM head where dr is on a GPU.
func (d *drafting) keepHead(dr *dgf.Draft) {
	if dr.Head != nil && !device.OnHost(dr.Dev) {
		d.head, d.headDev = dr.Head, dr.Dev
	}
}

// sharedHead is the draft's copy of the target's LM head where dev
// reaches it (the same GPU), else nil.
func (d *drafting) sharedHead(dev device.Device) device.Matrix {
	if d == nil || d.head == nil || !device.SameMemory(d.headDev, dev) {
		return nil
	}
	return d.head
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
	d := &drafting{info: DraftInfo{Name: "none", Adapt: adapt.Off}}
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
	switch o.Draft.Kind {
	case DraftNone:
		return d, nil
	case DraftNgram:
		d.info.Name = "ngram"
		for range r.slots {
			d.drafters = append(d.drafters, &drafters.Ngram{})
		}
		return d, nil
	case DraftEAGLE:
		return d, r.openEAGLE(d, o.Draft.Path)
	case DraftModel, DraftDGF:
		if isEAGLEDir(o.Draft.Path) {
			return d, r.openEAGLE(d, o.Draft.Path)
		}
		if o.Draft.Kind == DraftModel {
			return d, r.openModelDrafter(d, o.Draft.Path)
		}
	}
	if o.Draft.Kind == DraftAuto && r.openPulledEAGLE(d) {
		return d, nil
	}
	ck, where, err := r.dgfCheckpoint()
	if err != nil {
		return nil, err
	}
	mode := o.Adapt.Mode
	switch {
	case ck == nil && o.Draft.Kind == DraftScratch && mode == adapt.Off:
		return nil, errors.New("a new draft (scratch) learns only with adaptation on")
	case ck == nil && o.Draft.Kind != DraftScratch && mode != adapt.Background:
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
		d.drafters = append(d.drafters, drafters.NewModel(cpu.NewTargetWith(f.WithPool(s.pool))))
	}
	d.info.Name = "model:" + path
	d.closers = append(d.closers, dm.Close)
	return nil
}

// dgfCheckpoint resolves a DGF draft for the target: auto (the saved or
// shipped draft, nil when there is none), dgf:PATH, or scratch (nil). It
// refuses a draft made for another model.
func (r *Runner) dgfCheckpoint() (*draft.Checkpoint, string, error) {
	var ck *draft.Checkpoint
	where := r.opts.Draft.String()
	switch r.opts.Draft.Kind {
	case DraftAuto:
		ck, where = r.savedDraft(true)
	case DraftDGF:
		var err error
		if ck, err = draft.Load(r.opts.Draft.Path); err != nil {
			return nil, "", err
		}
		where = r.opts.Draft.Path
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
// not load is set aside (store.SetAside) with a notice, once, where
// setAside says so (not where a fit only looks).
func (r *Runner) savedDraft(setAside bool) (*draft.Checkpoint, string) {
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
		case !errors.Is(err, fs.ErrNotExist) && setAside:
			r.setAsideDraft(path, err)
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

// setAsideDraft moves the saved draft at path, which did not load (err),
// out of the way, and says so. One this process may not read is only
// ignored: it is not known to be damaged.
func (r *Runner) setAsideDraft(path string, err error) {
	text := fmt.Sprintf("ignoring the saved draft, which does not load (%v)", err)
	switch aside, serr := setAsideUnlessDenied(r.store, path, err); {
	case serr != nil:
		text += ": " + serr.Error()
	case aside != "":
		text += ": moved it to " + aside
	}
	r.notify(Notice{Warning: true, Text: text})
}

// setAsideUnlessDenied sets aside the file at path, which failed to load
// with err, unless err is a permission this process lacks.
func setAsideUnlessDenied(st *store.Store, path string, err error) (string, error) {
	if errors.Is(err, fs.ErrPermission) {
		return "", nil
	}
	return st.SetAside(path)
}

// openDGF runs a DGF draft (ck nil: a new one) where it fits best within
// the memory budget (placeDraft), on the device the options allow,
// adapting unless adaptation is off or its trainer does not fit.
func (r *Runner) openDGF(d *drafting, ck *draft.Checkpoint, where string) error {
	o := r.opts
	cfg := draft.ForTarget(r.model.Config(), 1, 0)
	if ck != nil {
		cfg = ck.Config
	}
	q := draftRequest{base: r.budget, cfg: cfg, m: r.model.Llama, ctx: r.ctx, seqs: len(r.slots),
		hostBytes: o.Adapt.Engine.HostBytes(), onGPU: o.Device.Kind == DeviceCUDA, onCPU: o.Device.Kind == DeviceCPU, needLearn: ck == nil}
	if o.Adapt.Mode != adapt.Off {
		c := o.Adapt.Engine
		q.learn = &train.Learn{Config: trainConfig(o.Adapt, o.Greedy), MaxRows: learnRows(c), MaxLen: learnLen(c), EvalDepth: learnDepth}
	}
	p, gdev, ok, err := r.placeOnDevices(&q)
	if err != nil || !ok {
		switch {
		case err != nil:
			return err
		case q.onGPU:
			return fmt.Errorf("device %s: %s has %s free, too little for the draft", o.Device, q.room.name, HumanBytes(q.room.free))
		}
		r.notify(Notice{Warning: true, Text: fmt.Sprintf("drafting off: no draft fits in the memory available beside the model (%s available)", HumanBytes(r.budget.Available))})
		return nil
	}
	if n := placeNotice(p, q.learn != nil, q.room, cfg.Hidden*cfg.Vocab >= gpuMinHead); n != "" {
		r.notify(Notice{Warning: true, Text: n})
	}
	devs, err := openPlaced(p, gdev, o.Device.Ordinal, r.per, o.Adapt.Threads)
	if err != nil {
		return err
	}
	r.budget = p.budget
	if ck == nil && p.learn {
		r.startDayZero(d, devs, cfg, where, p.learn)
		return nil
	}
	return r.startDGF(d, devs, cfg, ck, where, p.learn)
}

// openPlaced opens the devices of a placement: gdev (opened, or nil) for
// drafting on the GPU, a second stream of it for training there, host
// devices otherwise. gdev is closed when unused.
func openPlaced(p draftPlace, gdev device.Device, ordinal, draftThreads, trainThreads int) (draftDevices, error) {
	var devs draftDevices
	if p.draftGPU {
		devs.drafter = gdev
	} else {
		if gdev != nil {
			gdev.Close()
		}
		devs.drafter = device.NewHost(draftThreads)
	}
	switch {
	case !p.learn:
	case p.trainGPU:
		t, err := cuda.Open(ordinal)
		if err != nil {
			devs.close()
			return devs, err
		}
		devs.trainer = t
	default:
		devs.trainer = device.NewHost(trainThreads)
	}
	return devs, nil
}

// startDGF allocates the draft and its sequences (and its adaptation).
func (r *Runner) startDGF(d *drafting, devs draftDevices, cfg draft.Config, ck *draft.Checkpoint, where string, adapting bool) error {
	return r.startDGFUnless(nil, d, devs, cfg, ck, where, adapting)
}

// startDGFUnless is startDGF, giving up with errStopped between its steps
// once stopped (nil: never) says so.
func (r *Runner) startDGFUnless(stopped func() bool, d *drafting, devs draftDevices, cfg draft.Config, ck *draft.Checkpoint, where string, adapting bool) error {
	o := r.opts
	dr, err := dgf.NewDraft(devs.drafter, cfg, r.model.Llama)
	if err != nil {
		devs.close()
		return fmt.Errorf("draft %s: %w", where, err)
	}
	d.keepHead(dr)
	if ck != nil {
		if err := dr.Load(ck); err != nil {
			dr.Free()
			devs.close()
			return fmt.Errorf("draft %s: %w", where, err)
		}
	}
	d.info = DraftInfo{Name: "dgf:" + where, Device: devs.drafter.Name(), Adapt: adapt.Off}
	if adapting {
		a := o.Adapt
		ad, err := startAdaptive(stopped, dr, ck, where, r.model, devs.trainer, r.ctx, len(r.slots), o.Greedy, a, r.store, r.notify)
		if err != nil {
			devs.close()
			return err
		}
		if ck == nil {
			d.info.Name = "dgf:untrained"
		}
		d.info.Adapt, d.adaptive, d.info.Trainer = a.Mode, ad, devs.trainer.Name()
		for _, x := range ad.drafters {
			d.drafters = append(d.drafters, x)
		}
		ad.releaseDevices = devs.close // once the trainer is done with them
		d.closers = append(d.closers, ad.close)
		return nil
	}
	if err := dr.FreezeForDrafting(); err != nil {
		dr.Free()
		devs.close()
		return fmt.Errorf("draft %s: %w", where, err)
	}
	dr.DropFloat() // it never trains
	var seqs []*dgf.Sequence
	for range r.slots {
		seq := dr.NewSequence(r.ctx)
		seqs = append(seqs, seq)
		dd := drafters.NewDGF(seq)
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
