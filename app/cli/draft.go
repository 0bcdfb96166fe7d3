package cli

import (
	"fmt"
	"strings"

	"dovetail/cpu"
	"dovetail/engine"
)

// drafterFor builds the drafter named by --draft for a loaded target.
// Closing the returned func releases what the drafter holds.
func drafterFor(spec string, target *loaded, pool *cpu.Pool, ctx int) (engine.Drafter, func(), error) {
	none := func() {}
	kind, arg, _ := strings.Cut(spec, ":")
	switch kind {
	case "none", "auto":
		// auto: until a draft is known to pay on this machine, plain
		// decoding is the best available (the planner will decide).
		return nil, none, nil
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
	case "dgf":
		return nil, none, fmt.Errorf("--draft dgf: the Dovetail draft model is not built yet; use ngram or model:PATH")
	}
	return nil, none, usageError{fmt.Errorf("--draft %q: want none, ngram, model:PATH or dgf:PATH", spec)}
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
