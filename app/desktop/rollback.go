package desktop

import "strings"

// rollBack is how the learning view returns to the previous draft.
type rollBack int

const (
	noRollBack   rollBack = iota // no previous draft
	restoreDraft                 // the store's previous draft (Store.Restore)
	shelveDraft                  // the shipped draft: the adapted one set back (Store.Shelve)
)

// Where a running draft started from.
const (
	fromUntrained = iota
	fromShipped
	fromSaved
)

// startedFrom is where the draft running as name (runner.DraftInfo.Name)
// started: the model's saved draft (at saved), the shipped one, or
// untrained.
func startedFrom(name, saved string) int {
	switch {
	case name == "dgf:"+saved:
		return fromSaved
	case strings.HasPrefix(name, "dgf:embedded:"):
		return fromShipped
	}
	return fromUntrained
}

// rollBackWay is how to return to the previous draft, if one exists: a
// draft a save replaced (prev); or, once this run published a version,
// the draft it started from, which closing the model keeps as the
// previous one when it was saved, and which drafts again when the
// adapted one is set back when it was the shipped one. A draft that
// started untrained has no earlier one to return to.
func rollBackWay(prev, published bool, from int) rollBack {
	switch {
	case published && from == fromShipped:
		return shelveDraft
	case published && from == fromSaved, prev:
		return restoreDraft
	}
	return noRollBack
}
