package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"dovetail/app/runner"
	"dovetail/app/runner/discover"
	"dovetail/assets"
)

// findModel is the model a user names: a GGUF file's path, or a name
// as `serve --models` lists it (the files under dir, the models pulled
// into the models folder, the user's ollama and LM Studio models, the
// embedded model); "" is the embedded model.
func findModel(name, dir string) (discover.Model, error) {
	embedded := discover.Model{Name: assets.DefaultModelName, Source: "embedded"}
	if name == "" {
		return embedded, nil
	}
	if st, err := os.Stat(name); err == nil {
		if st.IsDir() {
			return discover.Model{}, fmt.Errorf("%s is a folder: name a GGUF file in it, or pass it as --models", name)
		}
		return discover.Model{Name: filepath.Base(name), Path: name, Source: "file"}, nil
	}
	home, _ := os.UserHomeDir()
	places := discover.UserPlaces(home)
	if dir != "" {
		places.Paths = []string{dir}
	}
	found, err := discover.Find(places)
	if err != nil {
		return discover.Model{}, err
	}
	if !hasName(found, embedded.Name) {
		found = append(found, embedded)
	}
	fleet, err := runner.NewFleet(found, runner.FleetOptions{})
	if err != nil {
		return discover.Model{}, err
	}
	if e, ok := fleet.Lookup(name); ok { // ollama's names too: "llama3" is "llama3:latest"
		return e, nil
	}
	return discover.Model{}, fmt.Errorf("no model %q: not a file, nor one of the models found (%s)", name, someNames(found))
}

func hasName(ms []discover.Model, name string) bool {
	for _, m := range ms {
		if m.Name == name {
			return true
		}
	}
	return false
}

// someNames lists the first few models' names.
func someNames(ms []discover.Model) string {
	const most = 6
	var names []string
	for i, m := range ms {
		if i == most {
			names = append(names, fmt.Sprintf("and %d more", len(ms)-most))
			break
		}
		names = append(names, m.Name)
	}
	return strings.Join(names, ", ")
}

// modelPath is the file -m names: a path as given, else a model's name
// (findModel), with the name a store's file should go by (a pulled or
// ollama model's blob says nothing; "": the file's own). A name that
// finds nothing but reads as a path (a ".gguf" file, one under a folder
// named from here) stays a path, for the loader to say what is wrong
// with it.
func modelPath(name string) (path, as string, err error) {
	if name == "" {
		return "", "", nil
	}
	if _, err := os.Stat(name); err == nil {
		return name, "", nil
	}
	e, err := findModel(name, "")
	if err == nil {
		return e.Path, storeName(e), nil
	}
	if strings.HasSuffix(strings.ToLower(name), ".gguf") || filepath.IsAbs(name) || strings.HasPrefix(name, ".") {
		return name, "", nil
	}
	return "", "", err
}

// storeName is the name a model kept in a store goes by ("": a file's,
// its own).
func storeName(e discover.Model) string {
	switch e.Source {
	case "pulled", "ollama", "lmstudio":
		return e.Name
	}
	return ""
}
