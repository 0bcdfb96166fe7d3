package runner

import (
	"fmt"
	"strings"
	"unicode"

	"dovetail/app/runner/pull"
	"dovetail/app/runner/store"
	"dovetail/models/draft"
	"dovetail/models/eagle"
)

// pulledEAGLE is the EAGLE draft --draft auto drafts with for m: among
// the drafts pulled into the models folder (pull.Drafts) those whose shape
// fits m, the one whose name shares the most words with m's (its file's
// and the name its GGUF gives: "EAGLE3-LLaMA3.1-Instruct-8B" beside "Meta
// Llama 3.1 8B Instruct"), the first by name on a tie. ok is false when
// none fits.
func pulledEAGLE(m *Model) (d pull.Draft, cfg draft.Config, ok bool) {
	ds, err := pull.Drafts("")
	if err != nil {
		return pull.Draft{}, draft.Config{}, false
	}
	mine := words(m.Name + " " + m.Config().Name)
	best := -1
	for _, c := range ds {
		ec, err := eagle.ReadConfig(c.Dir)
		if err != nil {
			continue
		}
		dc, err := ec.Draft(m.Config())
		if err != nil {
			continue
		}
		score := 0
		for w := range words(c.Name) {
			if mine[w] {
				score++
			}
		}
		if score > best {
			d, cfg, ok, best = c, dc, true, score
		}
	}
	return d, cfg, ok
}

// autoDraft is the draft --draft auto runs for a model, as calibration
// and setup plan it.
type autoDraft struct {
	cfg    draft.Config
	ck     *draft.Checkpoint // the saved weights it starts from, with their τ history (nil: none)
	pulled bool              // a published EAGLE draft, trained before it came
}

// autoDraftOf is the draft auto runs for m, in openDrafting's order: the
// pulled EAGLE draft that fits (with the adaptation saved of it, if any),
// else the saved or shipped DGF draft, else a new one.
func autoDraftOf(m *Model, st *store.Store) autoDraft {
	ck := savedDraftOf(m, st)
	if pd, cfg, ok := pulledEAGLE(m); ok {
		if ck != nil && ck.Meta[store.MetaStartedAs] != cfg.Kind.String()+":"+pd.Dir {
			ck = nil // another draft's: its τ is not this one's
		}
		return autoDraft{cfg: cfg, ck: ck, pulled: true}
	}
	if ck != nil {
		return autoDraft{cfg: ck.Config, ck: ck}
	}
	return autoDraft{cfg: draft.ForTarget(m.Config(), 1, 0)}
}

// openPulledEAGLE drafts with the pulled EAGLE draft that fits the model
// (auto), and says whether it does. One that does not open is passed over
// with a warning: auto then goes on to the DGF draft.
func (r *Runner) openPulledEAGLE(d *drafting) bool {
	pd, _, ok := pulledEAGLE(r.model)
	if !ok {
		return false
	}
	budget := r.budget
	if err := r.openEAGLE(d, pd.Dir); err != nil {
		r.budget, r.export = budget, nil
		r.notify(Notice{Warning: true, Text: fmt.Sprintf("not drafting with the EAGLE draft %s: %v", pd.Name, err)})
		return false
	}
	return len(d.drafters) > 0
}

// words is the set of runs of letters and of digits in s, lower case.
func words(s string) map[string]bool {
	out := map[string]bool{}
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for _, w := range f {
		start := 0
		for i := 1; i <= len(w); i++ {
			if i == len(w) || unicode.IsDigit(rune(w[i])) != unicode.IsDigit(rune(w[i-1])) {
				out[w[start:i]] = true
				start = i
			}
		}
	}
	return out
}
