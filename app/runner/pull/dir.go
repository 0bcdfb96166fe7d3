package pull

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"dovetail/app/runner/store"
)

// markerName marks a models folder as Dovetail's: Pull writes it, and
// nothing is removed or copied in a folder without it.
const markerName = ".dovetail-models"

// Dir is the user's models folder: $DOVETAIL_MODELS, or "models" in
// Dovetail's data folder (~/.local/share/dovetail/models on Linux).
func Dir() (string, error) {
	if d := os.Getenv("DOVETAIL_MODELS"); d != "" {
		return filepath.Abs(d)
	}
	s, err := store.Open()
	if err != nil {
		return "", err
	}
	return s.ModelsDir(), nil
}

// ours reports whether dir is a models folder Dovetail pulled into.
func ours(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, markerName))
	return err == nil && st.Mode().IsRegular()
}

// claim makes dir a models folder, or says why it cannot be one: a
// folder that holds another program's store (ollama's manifests/ and
// blobs/, with no marker) is not written to.
func claim(dir string) error {
	if ours(dir) {
		return mkdirs(dir)
	}
	for _, sub := range []string{"manifests", "blobs"} {
		if _, err := os.Stat(filepath.Join(dir, sub)); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s holds another program's models (ollama's?), not Dovetail's: set DOVETAIL_MODELS to a folder of its own", dir)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("models folder: %w", err)
	}
	// The marker first: a folder with it and no subfolders yet is still ours.
	note := []byte("Models pulled by Dovetail (dovetail pull). `dovetail rm NAME` removes one.\n")
	if err := os.WriteFile(filepath.Join(dir, markerName), note, 0o644); err != nil {
		return fmt.Errorf("models folder: %w", err)
	}
	return mkdirs(dir)
}

func mkdirs(dir string) error {
	for _, sub := range []string{"manifests", "blobs"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return fmt.Errorf("models folder: %w", err)
		}
	}
	return nil
}

// resolveDir is the folder a call works in.
func resolveDir(dir string) (string, error) {
	if dir == "" {
		return Dir()
	}
	return filepath.Abs(dir)
}
