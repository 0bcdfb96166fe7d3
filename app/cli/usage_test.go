package cli

import (
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// commands is every command of the command line, subcommands included.
func commands() []*cobra.Command {
	var all []*cobra.Command
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		all = append(all, c)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRoot(io.Discard, io.Discard, nil))
	return all
}

// How a command is called wrongly exits 2 with one line naming what was
// wrong, whichever part of cobra or of the command finds it.
func TestUsageErrorsExit2(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"nosuch"}, `unknown command "nosuch"`},
		{[]string{"rnu"}, "did you mean rm or run?"},
		{[]string{"run", "-p", "x", "extra"}, `"extra"`},
		{[]string{"show", "a.gguf", "b.gguf"}, "at most 1 arg"},
		{[]string{"drafts", "rm"}, "at least 1 arg"},
		{[]string{"drafts", "restore", "a", "b"}, "1 arg"},
		{[]string{"run", "-p", "x", "--temp", "hot"}, `--temp "hot": want a number`},
		{[]string{"run", "-p", "x", "-t", "1.5"}, `--threads "1.5": want a whole number`},
		{[]string{"serve", "--keep-alive", "5"}, `--keep-alive "5": want a duration`},
		{[]string{"run", "--nope"}, "unknown flag: --nope"},
		{[]string{"run", "-p", "x", "--temp", "-1"}, "--temp -1: want a value in [0, 100]"},
		{[]string{"run", "-p", "x", "--draft", ""}, `--draft "": want none, ngram, model:PATH, dgf:PATH, eagle:PATH, scratch or auto`},
		{[]string{"run", "-p", "x", "--device", ""}, `--device "": want auto, cpu or cuda[:N]`},
		{[]string{"distill", "--self", "2", "-o", "x.gguf", "--device", ""}, `--device "": want auto, cpu or cuda[:N]`},
		{[]string{"bench", "adapt", "--csv", "x.csv", "--draft", ""}, `--draft ""`},
		{[]string{"run", "-p", "x", "--adapt-memory", "-5"}, "--adapt-memory -5: want a value in [0, 268435456]"},
		{[]string{"serve", "--max-loaded", "0"}, "--max-loaded 0: want at least 1"},
		{[]string{"serve", "--parallel", "0"}, "--parallel 0"},
		{[]string{"chat", "--top-p", "NaN"}, "--top-p NaN: want a finite number"},
		{[]string{"bench", "adapt", "--csv", "x.csv", "-n", "0"}, "-n 0: want at least 1"},
		{[]string{"run", "-p", "x", "--ctx", "576460752303423488"}, "--ctx 576460752303423488: want a value in [0, 16777216]"},
	} {
		_, errOut, code := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%q: exit %d, %q; want exit 2 and one line with %q", c.args, code, errOut, c.want)
		}
	}
}

// numericTypes are the flag types flagBounds covers.
var numericTypes = map[string]bool{"int": true, "int64": true, "uint64": true, "float32": true, "float64": true, "duration": true}

// Every numeric flag of every command has a range: a new one without
// fails here rather than take -5 or 0 unchecked.
func TestEveryNumericFlagBounded(t *testing.T) {
	for _, c := range commands() {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if _, ok := boundOf(c, f.Name); numericTypes[f.Value.Type()] && !ok {
				t.Errorf("%s --%s (%s) has no entry in flagBounds", c.CommandPath(), f.Name, f.Value.Type())
			}
			if !numericTypes[f.Value.Type()] && f.Value.Type() != "bool" && !strings.HasPrefix(f.Value.Type(), "string") {
				t.Errorf("%s --%s: a flag of type %s that TestEveryNumericFlagBounded does not know", c.CommandPath(), f.Name, f.Value.Type())
			}
		})
	}
}

// Each numeric flag of each command refuses a value just past either end
// of its range, naming the flag and the range, and takes the end itself.
func TestFlagBounds(t *testing.T) {
	checked := 0
	for _, c := range commands() {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			b, ok := boundOf(c, f.Name)
			if !ok || !numericTypes[f.Value.Type()] {
				return
			}
			whole := f.Value.Type() != "float32" && f.Value.Type() != "float64"
			for _, e := range []struct {
				v      float64
				open   bool
				step   float64
				finite bool
			}{{b.lo, b.loOpen, -1, !math.IsInf(b.lo, 0)}, {b.hi, b.hiOpen, 1, !math.IsInf(b.hi, 0)}} {
				if !e.finite || f.Value.Type() == "uint64" && e.v <= 0 {
					continue
				}
				out := e.v
				if !e.open {
					out += e.step
					if !whole {
						out = e.v + e.step/4
					}
				}
				if msg := boundRefusal(t, c, f, out); !strings.Contains(msg, flagName(f)+" ") || !strings.Contains(msg, "want") {
					t.Errorf("%s %s %s: %q", c.CommandPath(), flagName(f), value(f, out), msg)
				}
				checked++
				if e.open {
					continue
				}
				if msg := boundRefusal(t, c, f, e.v); msg != "" {
					t.Errorf("%s %s %s, the end of its range, refused: %q", c.CommandPath(), flagName(f), value(f, e.v), msg)
				}
			}
		})
	}
	if checked < 60 {
		t.Errorf("only %d ends checked", checked)
	}
}

// boundRefusal is checkBounds' message for flag f of c set to v ("" when
// taken).
func boundRefusal(t *testing.T, c *cobra.Command, f *pflag.Flag, v float64) string {
	t.Helper()
	old := f.Value.String()
	defer func() { f.Value.Set(old); f.Changed = false }()
	if err := c.Flags().Set(f.Name, value(f, v)); err != nil {
		t.Fatalf("%s --%s %s: %v", c.CommandPath(), f.Name, value(f, v), err)
	}
	if err := checkBounds(c); err != nil {
		return err.Error()
	}
	return ""
}

// value writes v as flag f takes it.
func value(f *pflag.Flag, v float64) string {
	if f.Value.Type() == "duration" {
		return time.Duration(v * float64(time.Second)).String()
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// Help names each flag's value by its type: a backquoted word in a usage,
// which pflag takes as the value's name, would show `--install run --draft
// auto` as if a switch took a value.
func TestFlagHelpValueNames(t *testing.T) {
	for _, c := range commands() {
		c.Flags().VisitAll(func(f *pflag.Flag) {
			name, _ := pflag.UnquoteUsage(f)
			if strings.Contains(f.Usage, "`") || f.Value.Type() == "bool" && name != "" {
				t.Errorf("%s --%s shows as taking %q: %q", c.CommandPath(), f.Name, name, f.Usage)
			}
		})
	}
	out, _, _ := runCLI(t, "distill", "--help")
	if !strings.Contains(out, "--install  ") && !strings.Contains(out, "--install ") || strings.Contains(out, "--install run") {
		t.Errorf("distill --help:\n%s", out)
	}
}
