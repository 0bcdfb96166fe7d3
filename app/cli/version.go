package cli

import (
	"fmt"
	"runtime/debug"

	"dovetail/app/runner"
)

// Version is Dovetail's release.
const Version = "0.8.0"

// version is the release, the commit it was built from, and the CPU
// kernel level that runs here.
func version() string {
	commit := "unknown commit"
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, modified string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			commit = "commit " + rev
			if modified == "true" {
				commit += " (modified)"
			}
		}
	}
	return fmt.Sprintf("%s (%s), kernels %s", Version, commit, runner.KernelLevel())
}
