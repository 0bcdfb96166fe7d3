package runner

import (
	"testing"

	"dovetail/internal/testenv"
)

// The runner saves drafts, memories and profiles: tests that do not name a
// store of their own write to a directory of the tests'.
func TestMain(m *testing.M) { testenv.Main(m) }
