package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// markStarts wraps the RunE of every command under root so that the flag
// it returns says whether one began: an error from before that is
// cobra's, about how the command was called.
func markStarts(root *cobra.Command) *bool {
	started := new(bool)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if run := c.RunE; run != nil {
			c.RunE = func(c *cobra.Command, args []string) error {
				*started = true
				return run(c, args)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return started
}

// oneLine folds cobra's "Did you mean this?" block into the line before.
func oneLine(msg string) string {
	head, tail, ok := strings.Cut(msg, "\n\nDid you mean this?\n")
	if !ok {
		return strings.Join(strings.Fields(msg), " ")
	}
	return fmt.Sprintf("%s (did you mean %s?)", head, strings.Join(strings.Fields(tail), " or "))
}

// flagError is a flag that did not parse, in one line: the flag, the
// value and what it wants.
func flagError(c *cobra.Command, err error) error {
	var iv *pflag.InvalidValueError
	if errors.As(err, &iv) {
		f := iv.GetFlag()
		err = fmt.Errorf("%s %q: want %s", flagName(f), iv.GetValue(), valueKind(f))
	}
	return usageError{fmt.Errorf("%v (see '%s --help')", err, c.CommandPath())}
}

// flagName is how a user writes the flag: -n for a one-letter name,
// --name for the others.
func flagName(f *pflag.Flag) string {
	if len(f.Name) == 1 {
		return "-" + f.Name
	}
	return "--" + f.Name
}

// valueKind says in words what a flag's type takes.
func valueKind(f *pflag.Flag) string {
	switch t := f.Value.Type(); t {
	case "int", "int64", "int32":
		return "a whole number"
	case "uint", "uint64", "uint32":
		return "a whole number, 0 or more"
	case "float32", "float64":
		return "a number"
	case "duration":
		return "a duration such as 30s, 5m or 1h"
	case "bool":
		return "true or false"
	default:
		return "a " + t
	}
}
