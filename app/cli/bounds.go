package cli

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"dovetail/app/runner"
	"dovetail/models/draft"
)

// bound is the range a numeric flag's value must lie in: [lo, hi], either
// end open where loOpen or hiOpen says so.
type bound struct {
	lo, hi         float64
	loOpen, hiOpen bool
}

var (
	anyValue = bound{lo: math.Inf(-1), hi: math.Inf(1)}
	nonNeg   = atLeast(0)
	positive = bound{lo: 0, hi: math.Inf(1), loOpen: true}
	share    = within(0, 1)
)

func atLeast(lo float64) bound    { return bound{lo: lo, hi: math.Inf(1)} }
func within(lo, hi float64) bound { return bound{lo: lo, hi: hi} }

// flagBounds are the ranges of every numeric flag of every command, by
// name, or by "COMMAND --name" where a command's flag differs from the
// others of that name. They are checked before a command starts, so that
// a value out of range is refused in one line that names the flag, as a
// usage error; the runner still validates what it is handed. A numeric
// flag without an entry fails TestEveryNumericFlagBounded.
var flagBounds = map[string]bound{
	// The model flags of run, serve, chat and bench adapt (more threads
	// than the machine has are refused with its count, later).
	"threads": atLeast(1), "ctx": within(0, runner.MaxContext),
	"tree-k": within(1, 64), "tree-depth": within(0, 64), "tree-tokens": within(1, 256),
	"adapt-duty": {lo: 0, hi: 1, loOpen: true}, "adapt-threads": within(1, 1024), "adapt-save-every": nonNeg,
	"adapt-memory": within(0, 1<<28), "adapt-lr": positive, "adapt-anchor": nonNeg, "adapt-unroll": within(1, 16),
	"adapt-steps": atLeast(1), "adapt-window": atLeast(3), "adapt-batch": atLeast(1), "adapt-min-records": atLeast(1),
	"adapt-min-gain": anyValue, "adapt-branches": share,
	// Sampling (run, chat, bench adapt).
	"temp": within(0, 100), "top-p": share, "top-k": nonNeg, "min-p": share, "repeat-penalty": nonNeg, "seed": anyValue,
	"n": anyValue, // run: ≤ 0 is to the end of the context
	// serve.
	"port": within(0, 65535), "parallel": within(1, 256), "queue": nonNeg, "max-loaded": atLeast(1),
	"keep-alive": anyValue, "shutdown-grace": nonNeg,
	// bench and bench adapt.
	"depth": nonNeg, "reps": within(1, 10000), "bench adapt --n": atLeast(1), "repeat": within(1, 1000),
	"bench --gpu-layers": nonNeg,
	"rate":               within(0, 1000), "size": within(4, 1<<20), "for": nonNeg, // bench load
	// distill.
	"self": within(0, 1<<20), "self-len": within(2, 1<<16), "self-temp": within(0, 2), "blocks": within(1, draft.MaxBlocks),
	"ffn": nonNeg, "steps": nonNeg, "epochs": positive, "lr": {lo: 0, hi: 1, loOpen: true}, "warmup": nonNeg,
	"seq-len": atLeast(2), "batch": atLeast(2), "unroll": within(1, 16), "noise": nonNeg, "ce-weight": nonNeg,
	"feature-weight": nonNeg, "eval": {lo: 0, hi: 0.5, hiOpen: true}, "save-every": nonNeg, "stop-after": nonNeg,
	"distill --threads": within(1, 1024),
}

// boundOf is the range of c's flag name, if it has one.
func boundOf(c *cobra.Command, name string) (bound, bool) {
	path := c.CommandPath()
	if r := c.Root(); r != c {
		path = path[len(r.Name())+1:]
	}
	if b, ok := flagBounds[path+" --"+name]; ok {
		return b, true
	}
	b, ok := flagBounds[name]
	return b, ok
}

// checkBounds refuses the first flag given a value outside its range.
func checkBounds(c *cobra.Command) error {
	var err error
	c.Flags().Visit(func(f *pflag.Flag) {
		if err != nil {
			return
		}
		b, ok := boundOf(c, f.Name)
		v, numeric := numericValue(f)
		if !ok || !numeric {
			return
		}
		if want := b.check(v); want != "" {
			err = usageError{fmt.Errorf("%s %s: want %s", flagName(f), f.Value, want)}
		}
	})
	return err
}

// numericValue is a numeric flag's value (a duration's in seconds).
func numericValue(f *pflag.Flag) (float64, bool) {
	switch f.Value.Type() {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		v, err := strconv.ParseFloat(f.Value.String(), 64)
		return v, err == nil
	case "duration":
		d, err := time.ParseDuration(f.Value.String())
		return d.Seconds(), err == nil
	}
	return 0, false
}

// check says what the flag wants when v is outside b ("" when inside).
func (b bound) check(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "a finite number"
	case v < b.lo || b.loOpen && v == b.lo || v > b.hi || b.hiOpen && v == b.hi:
		return b.String()
	}
	return ""
}

func (b bound) String() string {
	switch {
	case math.IsInf(b.hi, 1) && b.loOpen:
		return "more than " + num(b.lo)
	case math.IsInf(b.hi, 1):
		return "at least " + num(b.lo)
	}
	open, shut := "[", "]"
	if b.loOpen {
		open = "("
	}
	if b.hiOpen {
		shut = ")"
	}
	return fmt.Sprintf("a value in %s%s, %s%s", open, num(b.lo), num(b.hi), shut)
}

// num writes a bound: whole numbers in full, others shortest.
func num(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
