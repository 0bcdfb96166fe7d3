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
// reaches a user. A usage error (a flag, argument or command that is not
// one, a value out of range) exits 2, any other failure 1, and an
// interrupted command 130, as a shell's would. start makes the API server
// `serve` runs (server.Start; nil: serve says this build has none).
func Main(args []string, stdout, stderr io.Writer, start api.Start) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "dovetail: internal error: %v\n", r)
			code = 2
		}
	}()
	root := newRoot(stdout, stderr, start)
	started := markStarts(root)
	root.SetArgs(args)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	var ie interrupted
	if errors.As(err, &ie) {
		fmt.Fprintf(stderr, "dovetail: %v\n", err)
		return 130
	}
	// What cobra refuses before a command starts (an unknown command,
	// the wrong number of arguments) is how the command was called.
	var ue usageError
	if !errors.As(err, &ue) && !*started {
		err = usageError{fmt.Errorf("%s (see '%s --help')", oneLine(err.Error()), cmd.CommandPath())}
	}
	fmt.Fprintf(stderr, "dovetail: %v\n", err)
	if errors.As(err, &ue) {
		return 2
	}
	return 1
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
	root.SetFlagErrorFunc(flagError)
	root.PersistentPreRunE = func(c *cobra.Command, _ []string) error { return checkBounds(c) }
	root.AddCommand(newRunCmd(), newShowCmd(), newSynthCmd(), newBenchCmd(), newDistillCmd(), newServeCmd(start), newDraftsCmd(),
		newProbeCmd(), newSetupCmd(), newChatCmd(), newPullCmd(), newListCmd(), newRmCmd())
	return root
}
