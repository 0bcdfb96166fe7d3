// Package enginetest is what the tests of the engine and its drafters
// share: a synthetic target whose exact distributions are cheap, the test
// models, and generation to a slice.
package enginetest

import (
	"context"
	"testing"

	"dovetail/cpu"
	"dovetail/engine"
	"dovetail/internal/golden"
	"dovetail/models"
)

// Pool is the CPU threads the tests' targets share.
var Pool = cpu.NewPool(2)

// Load is the test model file name.
func Load(t testing.TB, name string) *models.Llama {
	t.Helper()
	m, err := models.LoadLlama(golden.ModelPath(name))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Generate runs req on target and returns the tokens and statistics.
func Generate(t testing.TB, target engine.Target, req engine.Request) ([]int, engine.Stats) {
	t.Helper()
	var out []int
	st, err := engine.Generate(context.Background(), target, req, func(tok int) error {
		out = append(out, tok)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, st
}
