package runner

import (
	"os"
	"path/filepath"

	"dovetail/app/runner/discover"
	"dovetail/app/runner/pull"
)

// Pulled lists the models pulled into dir (the user's models folder when
// ""), by the names they were pulled by; a folder not made yet holds
// none.
func Pulled(dir string) ([]discover.Model, error) {
	if dir == "" {
		d, err := pull.Dir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	ms, err := pull.List(dir)
	if err != nil {
		return nil, err
	}
	out := make([]discover.Model, 0, len(ms))
	for _, m := range ms {
		out = append(out, discover.Model{Name: m.Name, Path: m.Path, Source: "pulled", Size: m.Size})
	}
	return out, nil
}

// UserModels are the models a name may find, in the order names find
// them: the files and folders of paths, the models pulled into the
// user's models folder, then ollama's and LM Studio's; each file once.
// A models folder that does not read is left out (the others stand).
func UserModels(paths ...string) ([]discover.Model, error) {
	home, _ := os.UserHomeDir()
	places := discover.UserPlaces(home)
	places.Paths = paths
	found, err := discover.Find(places)
	if err != nil {
		return nil, err
	}
	pulled, _ := Pulled("")
	return WithPulled(found, pulled), nil
}

// WithPulled lists the files named (found's "file" entries), the pulled
// models, then the rest of found; a pulled model's file is listed by its
// name only, even where a path named it.
func WithPulled(found, pulled []discover.Model) []discover.Model {
	abs := func(p string) string { a, _ := filepath.Abs(p); return a }
	isPulled := map[string]bool{}
	for _, m := range pulled {
		isPulled[abs(m.Path)] = true
	}
	var named, others []discover.Model
	for _, m := range found {
		switch {
		case isPulled[abs(m.Path)]:
		case m.Source == "file":
			named = append(named, m)
		default:
			others = append(others, m)
		}
	}
	return append(append(named, pulled...), others...)
}
