package cli

import (
	"strings"
	"testing"
)

// bench load reads for the time asked and says what it read.
func TestBenchLoad(t *testing.T) {
	out, errOut, code := runCLI(t, "bench", "load", "--rate", "0.2", "--size", "16", "--for", "0.3")
	if code != 0 || !strings.HasPrefix(out, "read ") || !strings.Contains(out, "GB/s") {
		t.Fatalf("exit %d, %q %q", code, out, errOut)
	}
}
