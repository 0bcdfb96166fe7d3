package server_test

import (
	"fmt"
	"os"
	"testing"
)

// TestMain points the user's directories at a temporary one: `dovetail
// run`, which tests compare against, saves adapted drafts and profiles
// there.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dovetail-server-test")
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
