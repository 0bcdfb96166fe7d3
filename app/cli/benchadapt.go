package cli

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"dovetail/app/runner"
	"dovetail/assets"
	"dovetail/engine/adapt"
)

type benchAdaptFlags struct {
	modelFlags
	workload, modes, csvOut, plotOut string
	n, repeat                        int
	temp                             float32
	seed                             uint64
}

func newBenchAdaptCmd() *cobra.Command {
	var f benchAdaptFlags
	c := &cobra.Command{
		Use:   "adapt [-m TARGET] [--workload FILE] [--draft SPEC,...] [--mode MODE,...] --csv OUT.csv [--plot OUT.png]",
		Short: "Replay a request stream and measure how online adaptation changes τ",
		Long: "Replay a workload (one request per line, `domain<TAB>prompt`, in order) through speculative\n" +
			"decoding once per configuration — each --draft with each --mode — and write one CSV row per\n" +
			"request: request,domain,tau,tokens_per_s,draft_version (then config and round_ms, the decode\n" +
			"time per round). --plot draws τ over the requests for every configuration (PNG).\n" +
			"--draft: auto (the saved or shipped draft of the target), dgf:PATH, or scratch (a new,\n" +
			"untrained draft: day 0). --mode: off, background, per-request. Nothing is saved.\n" +
			"Without -m and --workload: the embedded model and " + assets.DefaultWorkload + ".",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return benchAdapt(c, f) },
	}
	f.modelFlags.register(c, "")
	fl := c.Flags()
	fl.StringVar(&f.workload, "workload", "embedded:"+assets.DefaultWorkload, "workload file (embedded:NAME: one shipped in assets/)")
	fl.Lookup("draft").Usage = "comma-separated drafts to compare: auto, dgf:PATH, scratch"
	fl.StringVar(&f.modes, "mode", "off,background", "comma-separated adaptation modes to compare: off, background, per-request")
	fl.StringVar(&f.csvOut, "csv", "", "CSV file to write (required)")
	fl.StringVar(&f.plotOut, "plot", "", "PNG file: τ over requests for each configuration")
	fl.IntVarP(&f.n, "n", "n", 96, "tokens per request")
	fl.IntVar(&f.repeat, "repeat", 1, "replay the workload this many times in a row (a longer stream)")
	plan := fl.Lookup("plan")
	plan.Usage = "let the cost model choose the tree each round and decode without drafting while drafting would be slower, as run and serve do (τ then counts speculative rounds only)"
	plan.DefValue, f.plan = "false", false
	fl.Float32Var(&f.temp, "temp", 0, "temperature (0: greedy)")
	fl.Uint64Var(&f.seed, "seed", 1, "sampling seed of the first request (then +1 per request)")
	fl.Lookup("adapt").Hidden = true // --mode says it here
	return c
}

func benchAdapt(c *cobra.Command, f benchAdaptFlags) error {
	o, drafts, modes, err := f.configs(c)
	if err != nil {
		return usageError{fmt.Errorf("bench adapt: %v", err)}
	}
	items, err := runner.ReadWorkload(f.workload)
	if err != nil {
		return err
	}
	one := items
	for range f.repeat - 1 {
		items = append(items, one...)
	}
	// Create the outputs first: a typo in a path should not cost a run.
	out, err := os.Create(f.csvOut)
	if err != nil {
		return fmt.Errorf("bench adapt: %w", err)
	}
	defer out.Close()
	m, err := openModel(c, f.model)
	if err != nil {
		return err
	}
	defer m.Close()
	ctx, stop := interruptible()
	defer stop()

	w := csv.NewWriter(out)
	w.Write([]string{"request", "domain", "tau", "tokens_per_s", "draft_version", "config", "round_ms", "predicted_tokens_per_s"})
	var all [][]runner.ReplayRow
	var names []string
	for _, dr := range drafts {
		for _, mode := range modes {
			name := dr.String() + "/" + mode.String()
			res, err := runner.RunReplay(ctx, m, runner.Replay{Draft: dr, Mode: mode, Items: items, N: f.n, Temp: f.temp,
				Seed: f.seed, Options: o}, nil)
			if err != nil {
				if ctx.Err() != nil {
					return errInterrupted
				}
				return fmt.Errorf("bench adapt: %s: %w", name, err)
			}
			writeReplay(c, w, name, res)
			all, names = append(all, res.Rows), append(names, name)
		}
	}
	w.Flush()
	if err := w.Error(); err != nil {
		return fmt.Errorf("bench adapt: %s: %w", f.csvOut, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("bench adapt: %s: %w", f.csvOut, err)
	}
	if f.plotOut != "" {
		title := fmt.Sprintf("τ per request, %s, %s", m.Name, strings.TrimPrefix(f.workload, "embedded:"))
		if err := plotTau(f.plotOut, title, names, all); err != nil {
			return fmt.Errorf("bench adapt: %w", err)
		}
	}
	return nil
}

// configs checks the flags and reads the options, drafts and modes to
// replay: every draft in every mode.
func (f benchAdaptFlags) configs(c *cobra.Command) (runner.Options, []runner.DraftChoice, []adapt.Mode, error) {
	switch {
	case f.csvOut == "":
		return runner.Options{}, nil, nil, fmt.Errorf("--csv OUT.csv is required")
	case f.n < 1:
		return runner.Options{}, nil, nil, fmt.Errorf("-n %d must be at least 1", f.n)
	case f.repeat < 1 || f.repeat > 1000:
		return runner.Options{}, nil, nil, fmt.Errorf("--repeat %d out of range [1, 1000]", f.repeat)
	}
	mf := f.modelFlags
	mf.draft = "auto" // each of the list in turn
	o, err := mf.options(c.ErrOrStderr())
	if err != nil {
		return o, nil, nil, err
	}
	var modes []adapt.Mode
	for _, m := range strings.Split(f.modes, ",") {
		mode, err := adapt.ParseMode(strings.TrimSpace(m))
		if err != nil {
			return o, nil, nil, fmt.Errorf("--mode: %v", err)
		}
		modes = append(modes, mode)
	}
	var drafts []runner.DraftChoice
	for _, s := range strings.Split(f.draft, ",") {
		d, err := runner.ParseDraft(strings.TrimSpace(s))
		if err != nil || strings.TrimSpace(s) == "" || d.Kind != runner.DraftAuto && d.Kind != runner.DraftScratch && d.Kind != runner.DraftDGF {
			return o, nil, nil, fmt.Errorf("--draft %q: want auto, dgf:PATH or scratch", s)
		}
		if d.Kind == runner.DraftScratch && slices.Contains(modes, adapt.Off) {
			return o, nil, nil, fmt.Errorf("a scratch draft without adaptation never learns anything: drop --mode off or --draft scratch")
		}
		drafts = append(drafts, d)
	}
	return o, drafts, modes, nil
}

// writeReplay writes one replay's rows to the CSV, what adaptation did to
// stderr and the summary to stdout.
func writeReplay(c *cobra.Command, w *csv.Writer, name string, res runner.ReplayResult) {
	for _, r := range res.Rows {
		w.Write([]string{strconv.Itoa(r.Request), r.Domain, fmt.Sprintf("%.4f", r.Tau), fmt.Sprintf("%.2f", r.TokensPerSec),
			strconv.Itoa(r.Version), name, fmt.Sprintf("%.3f", r.RoundMs), fmt.Sprintf("%.2f", r.Predicted)})
	}
	if res.Adapted {
		st := res.Adaptation
		fmt.Fprintf(c.ErrOrStderr(), "%s: %d training runs, %d published (kept version %d), collecting at the end: %v, τ EMAs %.2f/%.2f, %d positions and %d rejected nodes held, %d tokens remembered\n",
			name, st.Runs, st.Published, st.Version, st.Collecting, st.ShortTau, st.LongTau, st.Records, st.Branches, st.Remembered)
	}
	summarize(c.OutOrStdout(), name, res.Rows)
}

// summarize prints mean τ, tokens/s and round time per stretch of one
// domain.
func summarize(w io.Writer, name string, rows []runner.ReplayRow) {
	fmt.Fprintf(w, "%s:\n", name)
	for lo := 0; lo < len(rows); {
		hi := lo
		var tau, tps, rms, pred float64
		for hi < len(rows) && rows[hi].Domain == rows[lo].Domain {
			tau, tps, rms, pred = tau+rows[hi].Tau, tps+rows[hi].TokensPerSec, rms+rows[hi].RoundMs, pred+rows[hi].Predicted
			hi++
		}
		n := float64(hi - lo)
		fmt.Fprintf(w, "  requests %3d–%3d %-12s τ %.3f  %7.1f tokens/s (planner: %.1f)  %.3f ms/round  draft v%d→v%d\n",
			rows[lo].Request, rows[hi-1].Request, rows[lo].Domain, tau/n, tps/n, pred/n, rms/n, rows[lo].Version, rows[hi-1].Version)
		lo = hi
	}
}
