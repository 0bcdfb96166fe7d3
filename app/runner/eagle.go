package runner

import (
	"errors"
	"fmt"
	"os"

	"dovetail/app/runner/pull"
	"dovetail/app/runner/store"
	"dovetail/dgf"
	"dovetail/engine/adapt"
	"dovetail/models/draft"
	"dovetail/models/eagle"
	"dovetail/train"
)

// isEAGLEDir reports whether path is a directory holding a published EAGLE
// checkpoint: dgf:PATH and model:PATH naming one run it as eagle:PATH.
func isEAGLEDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir() && eagle.IsCheckpoint(path)
}

// eagleDir is the directory --draft eagle:PATH names: PATH, or the folder
// of the pulled draft of that name (hf.co/ORG/REPO).
func eagleDir(path string) (string, error) {
	st, err := os.Stat(path)
	switch {
	case err == nil && st.IsDir():
		return path, nil
	case err == nil:
		return "", fmt.Errorf("EAGLE draft %s: a file, not a directory with config.json (a GGUF draft model is --draft model:PATH)", path)
	}
	if d, ok, _ := pull.FindDraft("", path); ok {
		return d.Dir, nil
	}
	return "", fmt.Errorf("EAGLE draft %s: no such directory, nor a pulled draft of that name (dovetail drafts lists them)", path)
}

// openEAGLE runs the published EAGLE draft in dir with the same trees,
// planner and text memory as a DGF draft. An EAGLE-1 draft adapts online
// as a DGF does (its fc and layers; the target's embeddings and head stay
// frozen). An EAGLE-3 draft drafts as published: its loss is over its own
// reduced vocabulary, which the trainer does not compute, so with
// adaptation on only the text memory learns. An EAGLE-3 draft reads three
// of the target's layers, which the target then exports (openTarget).
func (r *Runner) openEAGLE(d *drafting, dir string) error {
	o := r.opts
	dir, err := eagleDir(dir)
	if err != nil {
		return err
	}
	target := r.model.Config()
	target.Name = r.model.Name // what the user knows it by
	ck, err := eagle.Load(dir, target)
	if err != nil {
		return err
	}
	cfg := ck.Config
	learns := cfg.Kind == draft.EAGLE1 && o.Adapt.Mode != adapt.Off && ck.RopeFreqs == nil
	q := draftRequest{base: r.budget, cfg: cfg, m: r.model.Llama, embd: ck.Embed, ctx: r.ctx, seqs: len(r.slots),
		hostBytes: o.Adapt.Engine.HostBytes(), onGPU: o.Device.Kind == DeviceCUDA, onCPU: o.Device.Kind == DeviceCPU}
	if learns {
		c := o.Adapt.Engine
		q.learn = &train.Learn{Config: trainConfig(o.Adapt, o.Greedy), MaxRows: learnRows(c), MaxLen: learnLen(c), EvalDepth: learnDepth}
	}
	p, gdev, ok, err := r.placeOnDevices(&q)
	if err != nil || !ok {
		ck.Close()
		if err == nil {
			r.notify(Notice{Warning: true, Text: fmt.Sprintf("drafting off: the EAGLE draft %s does not fit in the memory available beside the model (%s available)",
				dir, HumanBytes(r.budget.Available))})
		}
		return err
	}
	if n := placeNotice(p, q.learn != nil, q.room, cfg.Hidden*cfg.Vocab >= gpuMinHead); n != "" {
		r.notify(Notice{Warning: true, Text: n})
	}
	devs, err := openPlaced(p, gdev, o.Device.Ordinal, r.per, o.Adapt.Threads)
	if err != nil {
		ck.Close()
		return err
	}
	r.budget = p.budget
	if err := r.startEAGLE(d, devs, ck, p.learn); err != nil {
		return err
	}
	if cfg.Kind == draft.EAGLE3 {
		r.export = &cfg.Aux
	}
	return nil
}

// startEAGLE builds the draft from ck on devs and a drafter per slot
// behind the text memory (an adapter: training when learns, else only
// remembering). It owns ck and devs from now on.
func (r *Runner) startEAGLE(d *drafting, devs draftDevices, ck *eagle.Checkpoint, learns bool) error {
	o := r.opts
	where := ck.Dir
	fail := func(err error) error {
		ck.Close()
		devs.close()
		return fmt.Errorf("draft %s: %w", where, err)
	}
	dr, err := dgf.NewDraftEmbedding(devs.drafter, ck.Config, r.model.Llama, ck.Embed)
	if err != nil {
		return fail(err)
	}
	d.keepHead(dr)
	dr.RopeFreqs, dr.D2T = ck.RopeFreqs, ck.D2T
	name := ck.Config.Kind.String() + ":" + where
	// As a loaded draft (not a new one), started as the published one; or
	// where adaptation left it, when this draft was adapted before.
	from := &draft.Checkpoint{Config: ck.Config, Tensors: ck.Tensors, Meta: map[string]string{store.MetaStartedAs: name}}
	if saved := r.adaptedEAGLE(name, ck.Config); learns && saved != nil {
		from = saved
	}
	if err := dr.Load(from); err != nil {
		dr.Free()
		return fail(err)
	}
	ck.Tensors, from.Tensors = nil, nil // on the device now
	a := o.Adapt
	if !learns {
		a.Mode = adapt.Off
		if o.Adapt.Mode != adapt.Off && ck.Config.Kind == draft.EAGLE3 {
			r.notify(Notice{Text: "an EAGLE-3 draft does not train online: the text memory learns from your text"})
		}
	}
	d.info = DraftInfo{Name: name, Device: devs.drafter.Name(), Adapt: a.Mode}
	trainDev := devs.trainer
	if trainDev == nil {
		trainDev = devs.drafter // a learner that never trains allocates nothing there
	}
	ad, err := startAdaptive(nil, dr, from, name, r.model, trainDev, r.ctx, len(r.slots), o.Greedy, a, r.store, r.notify)
	if err != nil {
		ck.Close()
		devs.close()
		if errors.Is(err, errStopped) {
			return err
		}
		return fmt.Errorf("draft %s: %w", where, err)
	}
	if learns {
		d.info.Trainer = devs.trainer.Name()
	}
	for _, x := range ad.drafters {
		d.drafters = append(d.drafters, x)
	}
	ad.releaseDevices = func() { devs.close(); ck.Close() }
	d.adaptive = ad
	d.closers = append(d.closers, ad.close)
	return nil
}

// adaptedEAGLE is the draft adaptation saved for the target when it
// started as the EAGLE draft name and still has its shape (nil: none):
// an adapted EAGLE-1 draft goes on from where it was.
func (r *Runner) adaptedEAGLE(name string, c draft.Config) *draft.Checkpoint {
	ck, _ := r.savedDraft(false)
	if ck == nil || ck.Meta[store.MetaStartedAs] != name || ck.Config != c {
		return nil
	}
	return ck
}
