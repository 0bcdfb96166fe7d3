package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"dovetail/assets"
	"dovetail/cpu"
	"dovetail/engine"
	"dovetail/gpu"
	"dovetail/models/draft"
)

// draftOptions are how a drafter runs besides which one it is.
type draftOptions struct {
	greedy bool // decoding is greedy: a DGF draft ranks its tree more sharply
	adapt  adaptSettings
	warn   io.Writer // warnings: an unreadable saved draft, a failed save
}

// drafterFor builds the drafter named by --draft for a loaded target. A
// DGF draft adapts online unless o.adapt.mode is off. Calling the returned
// func releases what the drafter holds (and saves an adapted draft).
func drafterFor(spec string, target *loaded, pool *cpu.Pool, ctx int, o draftOptions) (engine.Drafter, func(), error) {
	none := func() {}
	kind, arg, _ := strings.Cut(spec, ":")
	switch kind {
	case "none":
		return nil, none, nil
	case "auto", "dgf":
		ck, where, err := dgfCheckpoint(spec, target, o.warn)
		if err != nil {
			return nil, none, err
		}
		if ck == nil && o.adapt.mode != engine.AdaptBackground {
			return nil, none, nil
		}
		return dgfDrafter(ck, where, target, pool, ctx, o)
	case "ngram":
		return &engine.NgramDrafter{}, none, nil
	case "model":
		if arg == "" {
			return nil, none, usageError{fmt.Errorf("--draft model:PATH needs the path of a GGUF draft model")}
		}
		dm, err := loadModel(arg)
		if err != nil {
			return nil, none, fmt.Errorf("draft model: %w", err)
		}
		if err := sameVocab(target, dm); err != nil {
			dm.Model.Close()
			return nil, none, fmt.Errorf("draft model %s cannot draft for %s: %w", arg, target.Name, err)
		}
		d := engine.NewModelDrafter(cpu.NewTarget(dm.Model, pool, ctx))
		return d, func() { dm.Model.Close() }, nil
	}
	return nil, none, usageError{fmt.Errorf("--draft %q: want none, ngram, model:PATH or dgf:PATH", spec)}
}

// dgfCheckpoint resolves a DGF draft spec for target: auto (the saved or
// shipped draft: nil when there is none, and with background adaptation
// a new one starts — day 0), dgf:PATH, or scratch (nil: a new draft). It
// refuses a draft made for another model.
func dgfCheckpoint(spec string, target *loaded, warn io.Writer) (*draft.Checkpoint, string, error) {
	kind, arg, _ := strings.Cut(spec, ":")
	var ck *draft.Checkpoint
	where := kind
	switch kind {
	case "auto":
		ck, where = savedDraft(target, warn)
	case "scratch":
	case "dgf":
		if arg == "" {
			return nil, "", usageError{fmt.Errorf("--draft dgf:PATH needs the path of a draft made by dovetail distill")}
		}
		var err error
		if ck, err = draft.Load(arg); err != nil {
			return nil, "", err
		}
		where = arg
	default:
		return nil, "", usageError{fmt.Errorf("--draft %q is not a DGF draft (auto, dgf:PATH or scratch)", spec)}
	}
	if ck != nil {
		if err := ck.CheckTarget(draft.Fingerprint(target.Model.File), filepath.Base(target.Name)); err != nil {
			return nil, "", fmt.Errorf("draft %s: %w", where, err)
		}
	}
	return ck, where, nil
}

// sameVocab checks that two models tokenize alike, token for token.
func sameVocab(a, b *loaded) error {
	if a.Tok.VocabSize() != b.Tok.VocabSize() {
		return fmt.Errorf("vocabularies differ in size (%d and %d tokens)", a.Tok.VocabSize(), b.Tok.VocabSize())
	}
	for id := 0; id < a.Tok.VocabSize(); id++ {
		if a.Tok.TokenText(id) != b.Tok.TokenText(id) {
			return fmt.Errorf("vocabularies differ at token %d (%q and %q)", id, a.Tok.TokenText(id), b.Tok.TokenText(id))
		}
	}
	return nil
}

// namedDrafter says which draft --draft auto picked.
type namedDrafter struct {
	engine.FeatureDrafter
	name   string
	device string // where a DGF draft runs
}

func (d namedDrafter) Name() string { return d.name }

// Device names the device a DGF draft runs on ("" for other drafters).
func (d namedDrafter) Device() string { return d.device }

// Version is the version of an adapting draft's weights (0 for any other
// drafter: their weights never change).
func (d namedDrafter) Version() int {
	if a, ok := d.FeatureDrafter.(*engine.AdaptiveDrafter); ok {
		return a.Version()
	}
	return 0
}

// Verified passes a verified tree on to a drafter that learns from it.
func (d namedDrafter) Verified(nodes, parents []int, features [][]float32, path []int) {
	if b, ok := d.FeatureDrafter.(engine.BranchDrafter); ok {
		b.Verified(nodes, parents, features, path)
	}
}

// Recall passes on a drafter's remembered continuation (engine.Recaller).
func (d namedDrafter) Recall(ctx []int, p engine.TreeParams) *engine.Tree {
	if r, ok := d.FeatureDrafter.(engine.Recaller); ok {
		return r.Recall(ctx, p)
	}
	return &engine.Tree{}
}

// adaptiveOf is the adapting DGF drafter inside d, or nil.
func adaptiveOf(d engine.Drafter) *engine.AdaptiveDrafter {
	if n, ok := d.(namedDrafter); ok {
		a, _ := n.FeatureDrafter.(*engine.AdaptiveDrafter)
		return a
	}
	return nil
}

// dgfDrafter runs a DGF draft checkpoint from dgfCheckpoint (nil: a new
// one) for target on the device --device names.
func dgfDrafter(ck *draft.Checkpoint, where string, target *loaded, pool *cpu.Pool, ctx int, o draftOptions) (engine.Drafter, func(), error) {
	none := func() {}
	if ck == nil && o.adapt.mode == engine.AdaptOff {
		return nil, none, errors.New("a new draft learns only with adaptation on (--adapt background)")
	}
	if o.adapt.mode != engine.AdaptOff {
		a, err := newAdaptive(ck, where, target, pool, ctx, o.greedy, o.adapt, o.warn)
		if err != nil {
			return nil, none, err
		}
		return namedDrafter{a.drafter, a.Name(), a.live.Device()}, func() {
			if err := a.Close(); err != nil {
				fmt.Fprintf(o.warn, "warning: %v\n", err)
			}
		}, nil
	}
	dev, _, err := draftDevices(o.adapt.device, ck.Config, pool, 1, o.warn)
	if err != nil {
		return nil, none, err
	}
	d, err := gpu.NewDraft(dev, ck.Config, target.Model)
	if err != nil {
		return nil, none, fmt.Errorf("draft %s: %w", where, err)
	}
	if err := d.Load(ck); err != nil {
		return nil, none, fmt.Errorf("draft %s: %w", where, err)
	}
	if err := d.FreezeForDrafting(); err != nil {
		return nil, none, fmt.Errorf("draft %s: %w", where, err)
	}
	seq := d.NewSequence(ctx)
	dd := engine.NewDGFDrafter(seq)
	if o.greedy {
		dd.Sharpness = 2 // measured on both test models: τ +0.3
	}
	return namedDrafter{dd, "dgf:" + where, dev.Name()}, func() { seq.Free(); d.Free() }, nil
}

// savedDraft finds the DGF draft of a target for --draft auto: the one
// adaptation or `dovetail distill --install` saved in the user's config
// directory under the target's fingerprint (see draft.DefaultPath), else
// the draft shipped with the embedded default model when the target is
// that model. It returns nil when there is none. A saved draft that does
// not load (corrupted, or another model's) is ignored with a warning.
func savedDraft(target *loaded, warn io.Writer) (*draft.Checkpoint, string) {
	fp := draft.Fingerprint(target.Model.File)
	if path, err := draft.DefaultPath(fp); err == nil {
		ck, err := draft.Load(path)
		if err == nil {
			err = ck.CheckTarget(fp, filepath.Base(target.Name))
		}
		switch {
		case err == nil:
			return ck, path
		case !errors.Is(err, fs.ErrNotExist):
			fmt.Fprintf(warn, "warning: ignoring the saved draft: %v\n", err)
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

// userDraftPath is where `dovetail distill --install` puts a target's draft.
func userDraftPath(target *loaded) (string, error) {
	path, err := draft.DefaultPath(draft.Fingerprint(target.Model.File))
	if err != nil {
		return "", err
	}
	return path, os.MkdirAll(filepath.Dir(path), 0o755)
}
