package desktop

import (
	"fmt"
	"path/filepath"
	"strings"

	"dovetail/app/runner"
	"dovetail/internal/plural"
)

// The chat's status line says what runs where in words: no file names,
// paths or device internals (the settings show where files live).

// shortName is a model file's name without its folder and extension.
func shortName(path string) string {
	if path == "" {
		return "the embedded model"
	}
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}

// modelOn is the model and its threads: "stories15M on the CPU (4
// threads)".
func modelOn(m *runner.Model, r *runner.Runner) string {
	name := strings.TrimSuffix(m.Name, filepath.Ext(m.Name))
	if m.Embedded() {
		name = "the embedded model"
	}
	return fmt.Sprintf("%s on the CPU (%s)", name, plural.Of(r.Threads(), "thread"))
}

// draftWords is the draft and where it runs.
func draftWords(info runner.DraftInfo) string {
	kind, where, _ := strings.Cut(info.Name, ":")
	var d string
	switch {
	case kind == "none":
		return "no draft"
	case kind == "ngram":
		return "n-gram draft"
	case kind == "model":
		d = "draft model " + strings.TrimSuffix(filepath.Base(where), filepath.Ext(where))
	case kind == "dgf" && where == "untrained":
		d = "a new draft"
	case kind == "dgf" && strings.HasPrefix(where, "embedded:"):
		d = "the built-in draft"
	case kind == "dgf":
		d = "the saved draft"
	case kind == "eagle" || kind == "eagle3":
		d = eagleWords(kind, where)
	default:
		d = "a custom draft"
	}
	if info.Device != "" {
		d += " on " + deviceWords(info.Device)
	}
	return d
}

// trainerWords is where the trainer runs and what it does.
func trainerWords(info runner.DraftInfo, state string) string {
	if info.Trainer == "" {
		return state
	}
	return "trainer on " + deviceWords(info.Trainer) + ": " + state
}

// eagleWords names a published EAGLE draft: its kind, and its repository
// (ORG/REPO) where it was pulled, else its folder's name.
func eagleWords(kind, dir string) string {
	k := "EAGLE"
	if kind == "eagle3" {
		k = "EAGLE-3"
	}
	name := filepath.Base(dir)
	if org := filepath.Base(filepath.Dir(dir)); filepath.Base(filepath.Dir(filepath.Dir(dir))) == "hf.co" {
		name = org + "/" + name
	}
	return "the " + k + " draft " + name
}
