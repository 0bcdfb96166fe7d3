// Package cli holds the dovetail command line: one file per command, each
// turning flags into the runner's options and showing what it returns.
package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"dovetail/app/api"
)

// Main runs the command line and returns the exit status. Errors print as
// one line; a panic is caught and reported the same way, so no stack trace
// reaches a user. An interrupted command exits 130, as a shell's would.
// start makes the API server `serve` runs (server.Start; nil: serve says
// this build has none).
func Main(args []string, stdout, stderr io.Writer, start api.Start) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "dovetail: internal error: %v\n", r)
			code = 2
		}
	}()
	root := newRoot(stdout, stderr, start)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		var ie interrupted
		if errors.As(err, &ie) {
			fmt.Fprintf(stderr, "dovetail: %v\n", err)
			return 130
		}
		fmt.Fprintf(stderr, "dovetail: %v\n", err)
		var ue usageError
		if errors.As(err, &ue) {
			return 2
		}
		return 1
	}
	return 0
}

// usageError marks errors in how the command was called.
type usageError struct{ error }

// interrupted marks a command stopped by Ctrl-C: it exits 130, as a
// shell's would.
type interrupted struct{ error }

var errInterrupted = interrupted{errors.New("interrupted")}

func newRoot(stdout, stderr io.Writer, start api.Start) *cobra.Command {
	root := &cobra.Command{
		Use:           "dovetail",
		Short:         "Run language models fast on the CPU, with a draft model on the GPU",
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("dovetail {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{fmt.Errorf("%v (see '%s --help')", err, c.CommandPath())}
	})
	root.AddCommand(newRunCmd(), newShowCmd(), newSynthCmd(), newBenchCmd(), newDistillCmd(), newServeCmd(start), newDraftsCmd(),
		newProbeCmd(), newSetupCmd(), newChatCmd())
	return root
}
