package cli

import (
	"fmt"
	"os"
	"testing"
)

// TestMain points the user's directories at a temporary one: commands
// save adapted drafts there, and must not read or write the real ones.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dovetail-cli-test")
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
