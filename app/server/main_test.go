package server_test

import (
	"testing"

	"dovetail/internal/testenv"
)

// `dovetail run`, which tests compare against, saves adapted drafts and
// profiles: in a directory of the tests' own.
func TestMain(m *testing.M) { testenv.Main(m) }
