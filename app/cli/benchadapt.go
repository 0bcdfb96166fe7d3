package cli

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"dovetail/assets"
	"dovetail/cpu"
	"dovetail/engine"
)

type benchAdaptFlags struct {
	model, workload, drafts, modes, csvOut, plotOut string
	n, threads, repeat                              int
	plan                                            bool
	kernels                                         string // the CPU kernels' name, for --plan's profile
	temp                                            float32
	seed                                            uint64
	tree                                            engine.TreeParams
	adapt                                           adaptFlags
}

// adaptRow is one request's line of the CSV.
type adaptRow struct {
	Request      int
	Domain       string
	Tau          float64
	TokensPerSec float64
	Version      int
	Config       string
	RoundMs      float64 // decode time per round: what a trainer competing for the CPU slows
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
	fl := c.Flags()
	fl.StringVarP(&f.model, "model", "m", "", "target GGUF model (default: the embedded model)")
	fl.StringVar(&f.workload, "workload", "embedded:"+assets.DefaultWorkload, "workload file (embedded:NAME: one shipped in assets/)")
	fl.StringVar(&f.drafts, "draft", "auto", "comma-separated drafts to compare: auto, dgf:PATH, scratch")
	fl.StringVar(&f.modes, "mode", "off,background", "comma-separated adaptation modes to compare: off, background, per-request")
	fl.StringVar(&f.csvOut, "csv", "", "CSV file to write (required)")
	fl.StringVar(&f.plotOut, "plot", "", "PNG file: τ over requests for each configuration")
	fl.IntVarP(&f.n, "n", "n", 96, "tokens per request")
	fl.IntVar(&f.repeat, "repeat", 1, "replay the workload this many times in a row (a longer stream)")
	fl.BoolVar(&f.plan, "plan", false, "let the cost model choose the tree each round and decode without drafting while drafting would be slower, as run and serve do (τ then counts speculative rounds only)")
	fl.Float32Var(&f.temp, "temp", 0, "temperature (0: greedy)")
	fl.Uint64Var(&f.seed, "seed", 1, "sampling seed of the first request (then +1 per request)")
	fl.IntVarP(&f.threads, "threads", "t", runtime.NumCPU(), "CPU threads of the target")
	fl.IntVar(&f.tree.TopK, "tree-k", engine.ServerTree.TopK, "draft tree: children per expanded node")
	fl.IntVar(&f.tree.Depth, "tree-depth", engine.ServerTree.Depth, "draft tree: expansion rounds")
	fl.IntVar(&f.tree.Tokens, "tree-tokens", engine.ServerTree.Tokens, "draft tree: most nodes verified per round (γ)")
	f.adapt.register(c)
	fl.Lookup("adapt").Hidden = true // --mode says it here
	return c
}

func benchAdapt(c *cobra.Command, f benchAdaptFlags) error {
	if f.csvOut == "" {
		return usageError{fmt.Errorf("bench adapt: --csv OUT.csv is required")}
	}
	if f.n < 1 {
		return usageError{fmt.Errorf("bench adapt: -n %d must be at least 1", f.n)}
	}
	if f.threads < 1 || f.threads > 1024 {
		return usageError{fmt.Errorf("bench adapt: --threads %d out of range [1, 1024]", f.threads)}
	}
	if err := f.tree.Validate(); err != nil {
		return usageError{fmt.Errorf("bench adapt: %v", err)}
	}
	base, err := f.adapt.settings()
	if err != nil {
		return usageError{fmt.Errorf("bench adapt: %v", err)}
	}
	base.save, base.recall = false, false
	var modes []engine.AdaptMode
	for _, m := range strings.Split(f.modes, ",") {
		mode, err := engine.ParseAdaptMode(strings.TrimSpace(m))
		if err != nil {
			return usageError{fmt.Errorf("bench adapt: --mode: %v", err)}
		}
		modes = append(modes, mode)
	}
	specs := strings.Split(f.drafts, ",")
	for _, s := range specs {
		if s = strings.TrimSpace(s); s != "auto" && s != "scratch" && !strings.HasPrefix(s, "dgf:") {
			return usageError{fmt.Errorf("bench adapt: --draft %q: want auto, dgf:PATH or scratch", s)}
		}
	}
	items, err := readWorkload(f.workload)
	if err != nil {
		return err
	}
	if f.repeat < 1 || f.repeat > 1000 {
		return usageError{fmt.Errorf("bench adapt: --repeat %d out of range [1, 1000]", f.repeat)}
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
	if f.kernels, err = checkKernels(c.ErrOrStderr()); err != nil {
		return err
	}
	lm, err := loadModel(f.model)
	if err != nil {
		return err
	}
	defer lm.Model.Close()
	pool := cpu.NewPool(f.threads)
	defer pool.Close()
	target := cpu.NewTarget(lm.Model, pool, 0)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	w := csv.NewWriter(out)
	w.Write([]string{"request", "domain", "tau", "tokens_per_s", "draft_version", "config", "round_ms"})
	var all [][]adaptRow
	var names []string
	for _, spec := range specs {
		spec = strings.TrimSpace(spec)
		for _, mode := range modes {
			name := spec + "/" + mode.String()
			if spec == "scratch" && mode == engine.AdaptOff {
				return usageError{fmt.Errorf("bench adapt: a scratch draft without adaptation never learns anything: drop --mode off or --draft scratch")}
			}
			s := base
			s.mode = mode
			rows, err := replay(ctx, c.ErrOrStderr(), f, lm, pool, target, items, spec, s)
			if err != nil {
				return fmt.Errorf("bench adapt: %s: %w", name, err)
			}
			for i := range rows {
				rows[i].Config = name
				r := rows[i]
				w.Write([]string{strconv.Itoa(r.Request), r.Domain, fmt.Sprintf("%.4f", r.Tau), fmt.Sprintf("%.2f", r.TokensPerSec),
					strconv.Itoa(r.Version), r.Config, fmt.Sprintf("%.3f", r.RoundMs)})
			}
			all, names = append(all, rows), append(names, name)
			summarize(c.OutOrStdout(), name, rows)
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
		title := fmt.Sprintf("τ per request, %s, %s", lm.Name, strings.TrimPrefix(f.workload, "embedded:"))
		if err := plotTau(f.plotOut, title, names, all); err != nil {
			return fmt.Errorf("bench adapt: %w", err)
		}
	}
	return nil
}

// replay runs the workload once with one draft and adaptation mode.
func replay(ctx context.Context, warn io.Writer, f benchAdaptFlags, lm *loaded, pool *cpu.Pool, target *cpu.Target,
	items []workItem, spec string, s adaptSettings) ([]adaptRow, error) {
	ck, where, err := dgfCheckpoint(spec, lm, warn)
	if err != nil {
		return nil, err
	}
	if ck == nil && spec == "auto" {
		return nil, fmt.Errorf("no saved or shipped draft for %s: use --draft dgf:PATH or scratch", lm.Name)
	}
	drafter, closeDraft, err := dgfDrafter(ck, where, lm, pool, 0, draftOptions{greedy: f.temp <= 0, adapt: s, warn: warn})
	if err != nil {
		return nil, err
	}
	defer closeDraft()
	defer func() {
		if ad := adaptiveOf(drafter); ad != nil {
			st := ad.Adaptation()
			fmt.Fprintf(warn, "%s/%s: %d training runs, %d published (kept version %d), collecting at the end: %v, τ EMAs %.2f/%.2f, %d positions and %d rejected nodes held, %d tokens remembered\n",
				spec, s.mode, st.Runs, st.Published, st.Version, st.Collecting, st.ShortTau, st.LongTau, st.Records, st.Branches, st.Remembered)
		}
	}()
	var planner *engine.Planner
	if f.plan {
		if planner, err = plannerFor(target, lm, f.kernels, f.threads, f.tree.TopK, warn); err != nil {
			return nil, err
		}
	}
	var rows []adaptRow
	for i, it := range items {
		params := engine.SamplerParams{Temperature: f.temp, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, Seed: f.seed + uint64(i)}
		req := engine.Request{Prompt: lm.Tok.Encode(it.Prompt, true, false), MaxTokens: f.n, Sampler: params,
			Stop: lm.Tok.IsEOG, Drafter: drafter, Tree: f.tree, Planner: planner}
		st, err := engine.Generate(ctx, target, req, func(int) error { return nil })
		if ad := adaptiveOf(drafter); ad != nil {
			ad.Finish()
		}
		if err != nil {
			return nil, fmt.Errorf("request %d: %w", i+1, err)
		}
		roundMs := 0.0
		if st.Rounds > 0 {
			roundMs = ms(st.GenTime) / float64(st.Rounds)
		}
		rows = append(rows, adaptRow{Request: i + 1, Domain: it.Domain, Tau: st.Tau(), TokensPerSec: st.GenTokensPerSec(),
			Version: draftVersion(drafter), RoundMs: roundMs})
	}
	return rows, nil
}

// summarize prints mean τ, tokens/s and round time per stretch of one
// domain.
func summarize(w io.Writer, name string, rows []adaptRow) {
	fmt.Fprintf(w, "%s:\n", name)
	for lo := 0; lo < len(rows); {
		hi := lo
		var tau, tps, rms float64
		for hi < len(rows) && rows[hi].Domain == rows[lo].Domain {
			tau, tps, rms = tau+rows[hi].Tau, tps+rows[hi].TokensPerSec, rms+rows[hi].RoundMs
			hi++
		}
		n := float64(hi - lo)
		fmt.Fprintf(w, "  requests %3d–%3d %-12s τ %.3f  %7.1f tokens/s  %.3f ms/round  draft v%d→v%d\n",
			rows[lo].Request, rows[hi-1].Request, rows[lo].Domain, tau/n, tps/n, rms/n, rows[lo].Version, rows[hi-1].Version)
		lo = hi
	}
}
