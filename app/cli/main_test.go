package cli

import (
	"os"
	"testing"

	"dovetail/internal/testenv"
)

// mainEnv makes the test binary run the command line itself: tests that
// need a real process (standard input, a signal) run it that way.
const mainEnv = "DOVETAIL_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr, nil))
	}
	testenv.Main(m)
}
