// Package testenv is what tests of commands share: a user environment of
// their own.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// Main runs m's tests with the user's config, cache and home directories
// pointed at a temporary one: commands save adapted drafts and profiles
// there, and tests must neither read nor write the real ones.
func Main(m *testing.M) {
	dir, err := os.MkdirTemp("", "dovetail-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	os.Setenv("XDG_CACHE_HOME", dir)
	os.Setenv("HOME", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
