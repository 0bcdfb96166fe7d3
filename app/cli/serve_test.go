package cli

import (
	"strings"
	"testing"

	"dovetail/app/runner"
)

// Bad serve flags are usage errors (exit 2), found before the model loads.
func TestServeFlags(t *testing.T) {
	for _, args := range [][]string{
		{"serve", "--parallel", "0"},
		{"serve", "--port", "70000"},
		{"serve", "--queue", "-1"},
		{"serve", "--shutdown-grace", "-1s"},
		{"serve", "--threads", "0"},
		{"serve", "--ctx", "-5"},
		{"serve", "extra"},
		{"serve", "--nope"},
	} {
		_, errOut, code := runCLI(t, args...)
		if code != 2 || !strings.HasPrefix(errOut, "dovetail: ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}

// serve --models with no model anywhere yet starts empty, saying how to
// get one, as ollama's server does: /api/pull fills it.
func TestServeFleetEmpty(t *testing.T) {
	t.Setenv("DOVETAIL_MODELS", t.TempDir())
	t.Setenv("OLLAMA_MODELS", t.TempDir())
	c := newServeCmd(nil)
	var errOut strings.Builder
	c.SetErr(&errOut)
	fleet, err := serveFleet(c, serveFlags{models: t.TempDir()}, runner.DefaultOptions(), nil)
	if err != nil || len(fleet.Entries()) != 0 || !strings.Contains(errOut.String(), "/api/pull") {
		t.Fatalf("%v, %d models, %q", err, len(fleet.Entries()), errOut.String())
	}
	fleet.Close()
}
