package desktop

import (
	"os"
	"path/filepath"
	"slices"

	"dovetail/app/runner/discover"
)

// maxOpened bounds the files and folders remembered as opened.
const maxOpened = 20

// findModels lists what the picker offers: the embedded model, the model
// given, the last one, the files and folders opened before, and the
// user's models, each with its facts.
func (a *App) findModels() {
	found := []discover.Model{{Name: "TinyStories-656K (embedded)", Source: "embedded"}}
	places := a.o.Places
	if places == nil {
		home, _ := os.UserHomeDir()
		p := discover.UserPlaces(home)
		places = &p
	}
	p := a.currentPrefs()
	// Each path apart: one that went away (a drive unplugged) leaves the
	// rest standing, and stays remembered for when it comes back.
	for _, extra := range append([]string{a.o.Model, p.Model, p.Folder}, p.Opened...) {
		if extra != "" {
			ms, _ := discover.Find(discover.Places{Paths: []string{extra}})
			found = append(found, ms...)
		}
	}
	stores := *places
	more, err := discover.Find(stores)
	if err != nil { // a path named in places that went away
		stores.Paths = nil
		more, _ = discover.Find(stores)
	}
	found = dedupe(append(found, more...))
	a.mu.Lock()
	known := a.facts
	a.mu.Unlock()
	facts := describeAll(found, known)
	a.mu.Lock()
	a.models, a.facts = found, facts
	a.mu.Unlock()
}

// dedupe keeps each file once, where it first appears.
func dedupe(ms []discover.Model) []discover.Model {
	seen := map[string]bool{}
	var out []discover.Model
	for _, m := range ms {
		key := m.Source
		if m.Path != "" {
			key, _ = filepath.Abs(m.Path)
		}
		if !seen[key] {
			seen[key] = true
			out = append(out, m)
		}
	}
	return out
}

// describeAll is each model's facts: those known already of a file still
// its size, else read from its header (a read a model, not a refresh).
func describeAll(ms []discover.Model, known map[string]modelFacts) map[string]modelFacts {
	out := map[string]modelFacts{}
	for _, m := range ms {
		if f, ok := known[m.Path]; ok && !f.unreadable && (m.Source == "embedded" || f.size == m.Size) {
			out[m.Path] = f
			continue
		}
		out[m.Path] = describeModel(m)
	}
	return out
}

// addModelPath adds a file or folder to what the picker offers, and
// remembers it for the next start.
func (a *App) addModelPath(path string) ([]discover.Model, error) {
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	ms, err := discover.Find(discover.Places{Paths: []string{path}})
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	known := a.facts
	a.mu.Unlock()
	facts := describeAll(ms, known)
	a.mu.Lock()
	a.models = dedupe(append(a.models, ms...))
	for k, f := range facts {
		a.facts[k] = f
	}
	a.prefs.Opened = remember(a.prefs.Opened, path)
	p := a.prefs
	a.mu.Unlock()
	savePrefs(a.st, p)
	return ms, nil
}

// remember puts path first in opened, once, keeping the newest maxOpened.
func remember(opened []string, path string) []string {
	out := append([]string{path}, slices.DeleteFunc(slices.Clone(opened), func(s string) bool { return s == path })...)
	return out[:min(len(out), maxOpened)]
}

// modelList is what the picker offers.
func (a *App) modelList() []discover.Model {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]discover.Model(nil), a.models...)
}

// factsOf are what the picker says of the model at path.
func (a *App) factsOf(path string) modelFacts {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.facts[path]
}
