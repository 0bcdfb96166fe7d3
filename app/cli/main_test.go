package cli

import (
	"testing"

	"dovetail/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }
