// Package synthtest makes random-weight models (package synth) for other
// packages' tests: a file in the test's temporary directory, or the model
// loaded from it.
package synthtest

import (
	"path/filepath"
	"testing"

	"dovetail/models"
	"dovetail/models/synth"
)

// Shape is s in synth's -shape syntax ("dim=64,layers=2,..."), or the
// test's end where s is not one.
func Shape(t testing.TB, s string) synth.Shape {
	t.Helper()
	sh, err := synth.ParseShape(s)
	if err != nil {
		t.Fatal(err)
	}
	return sh
}

// File writes a model of shape sh built with opts into the test's
// temporary directory and returns its path.
func File(t testing.TB, sh synth.Shape, opts synth.Options) string {
	t.Helper()
	w, err := synth.Build(sh, opts)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "synth.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Model is File's model loaded, closed at the test's end.
func Model(t testing.TB, sh synth.Shape, opts synth.Options) *models.Llama {
	t.Helper()
	m, err := models.LoadLlama(File(t, sh, opts))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
