package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/spf13/cobra"

	"dovetail/app/runner"
	"dovetail/app/runner/discover"
	"dovetail/app/runner/probe"
	"dovetail/app/runner/store"
)

type setupFlags struct {
	models      []string
	dir         string
	yes, asJSON bool
	recalibrate bool
	vram        string // plan for a card of this size that need not be here
	bandwidth   string // the planned card's memory bandwidth ("": assumed)
	tau         string // predict at this acceptance ("": the draft's own)
	layers      string // --gpu-layers
}

// setupResult is one model's object in --json.
type setupResult struct {
	Model        string            `json:"model"`
	Path         string            `json:"path"`
	Source       string            `json:"source"`
	Placement    runner.Placement  `json:"placement"`
	Memory       memoryStats       `json:"memory"`
	Fit          string            `json:"fit"`
	Reason       string            `json:"reason"`
	Predicted    runner.Prediction `json:"predicted"`
	SettingsFile string            `json:"settings_file"`
	Runs         int               `json:"runs"`
	Drift        float64           `json:"measured_over_predicted,omitempty"`
	// GPUs is the arithmetic of the placement on each GPU.
	GPUs        []runner.GPUPlan `json:"gpu_arithmetic,omitempty"`
	fingerprint string
	settings    runner.ModelSettings
}

func newSetupCmd() *cobra.Command {
	var f setupFlags
	c := &cobra.Command{
		Use:   "setup [-m MODEL ...] [--models DIR] [--yes] [--json]",
		Short: "Find your models, calibrate this machine, and choose and save the settings that fit",
		Long: "Probe this machine, find the models (the files and folders given with -m and --models;\n" +
			"without them the embedded model, pulled models and those ollama and LM Studio keep), calibrate\n" +
			"what predictions need (cached per machine and model; again when measured speeds drift\n" +
			"more than 25% from predictions), and for each model show how it fits: memory by part and\n" +
			"device, the verdict, the placement and the predicted speed. The chosen settings are saved\n" +
			"to the settings file that run, serve and the desktop app start from (flags override).",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return setup(c, f) },
	}
	fl := c.Flags()
	fl.StringArrayVarP(&f.models, "model", "m", nil, "a GGUF model file or a folder of them (repeatable)")
	fl.StringVar(&f.dir, "models", "", "a folder of GGUF models")
	fl.BoolVar(&f.yes, "yes", false, "save the settings without asking")
	fl.BoolVar(&f.asJSON, "json", false, "print one JSON object per model (one line each)")
	fl.BoolVar(&f.recalibrate, "recalibrate", false, "calibrate again even where a calibration is kept")
	fl.StringVar(&f.vram, "vram", "", "plan for an NVIDIA card with this much memory (8GiB, 6GB, …) instead of this machine's: "+
		"the placement's arithmetic, on any machine; nothing is saved")
	fl.StringVar(&f.bandwidth, "vram-bandwidth", "", "the memory bandwidth of the card --vram plans for (448GB/s, 1TB/s, …), which its layers' and draft's predicted speed follows "+
		"(default "+plannedBandwidthWords+")")
	fl.StringVar(&f.tau, "tau", "", "predict with the draft accepting this many tokens a round: one value or a range (3.0,3.5), "+
		"in place of its history or the prior; the speedup over the target alone on the CPU is shown")
	fl.StringVar(&f.layers, "gpu-layers", "auto", "the target's last layers (with its LM head) to plan on the GPU: a number, 0 (none), or auto (as many as fit beside the draft)")
	return c
}

// plannedBandwidth is the memory bandwidth assumed of a card --vram plans
// for without --vram-bandwidth, bytes/s: issue #38 takes it for the
// Dovetail paper's 8 GB RTX 2080 SUPER; 448 GB/s is an RTX 2080's (a
// 256-bit bus at 14 Gb/s a pin), the SUPER's data sheet says 496 (15.5).
const plannedBandwidth = 448e9

// plannedBandwidthWords says plannedBandwidth in the help and output.
const plannedBandwidthWords = "448 GB/s (an RTX 2080's; the Dovetail paper's RTX 2080 SUPER is rated 496)"

// plannedRate reads --vram-bandwidth: a size a second ("448GB/s", "1TB/s";
// "/s" may be left off), from 1 GB/s to 100 TB/s; "" is plannedBandwidth.
func plannedRate(rate string) (float64, error) {
	if rate == "" {
		return plannedBandwidth, nil
	}
	b, err := humanize.ParseBytes(strings.TrimSuffix(strings.TrimSpace(rate), "/s"))
	if err != nil || b < 1e9 || b > 100e12 {
		return 0, usageError{fmt.Errorf("--vram-bandwidth %q: want a rate from 1GB/s to 100TB/s, such as 448GB/s", rate)}
	}
	return float64(b), nil
}

// plannedCard is the card --vram asks setup to plan for, in place of the
// machine's GPUs, with the memory bandwidth --vram-bandwidth gives it
// (nil: no --vram).
func plannedCard(vram, rate string) (*probe.GPU, error) {
	if vram == "" {
		if rate != "" {
			return nil, usageError{fmt.Errorf("--vram-bandwidth %q: only with --vram, for the card it plans for", rate)}
		}
		return nil, nil
	}
	b, err := humanize.ParseBytes(vram)
	if err != nil || b < 256<<20 || b > 1<<42 {
		return nil, usageError{fmt.Errorf("--vram %q: want a size from 256MiB to 4TiB, such as 8GiB or 6GB", vram)}
	}
	bw, err := plannedRate(rate)
	if err != nil {
		return nil, err
	}
	name := "the planned " + runner.HumanBytes(b) + " card"
	return &probe.GPU{Name: name, VRAMTotalBytes: b, VRAMFreeBytes: b, MemoryBandwidthGBs: bw / 1e9}, nil
}

// fitOptions reads --gpu-layers and --tau.
func fitOptions(f setupFlags) (runner.FitOptions, error) {
	var o runner.FitOptions
	var err error
	if o.GPULayers, err = runner.ParseGPULayers(f.layers); err != nil {
		return o, usageError{err}
	}
	if f.tau != "" {
		if o.Tau, err = runner.ParseTau(f.tau); err != nil {
			return o, usageError{err}
		}
	}
	return o, nil
}

func setup(c *cobra.Command, f setupFlags) error {
	stderr := c.ErrOrStderr()
	card, err := plannedCard(f.vram, f.bandwidth)
	if err != nil {
		return err
	}
	opts, err := fitOptions(f)
	if err != nil {
		return err
	}
	st, err := store.Open()
	if err != nil {
		return err
	}
	found, err := findModels(f)
	if err != nil {
		return err
	}
	fmt.Fprintln(stderr, "probing this machine…")
	machine := probe.Run(probe.Options{Measure: true})
	for _, fd := range machine.Findings {
		fmt.Fprintf(stderr, "note: %s\n", fd)
	}
	gpuHere := len(machine.GPUs) > 0 // what calibration can time a draft on
	if card != nil {
		machine.GPUs = []probe.GPU{*card}
		bw := fmt.Sprintf("%.0f GB/s", card.MemoryBandwidthGBs)
		if f.bandwidth == "" {
			bw = "an assumed " + plannedBandwidthWords
		}
		fmt.Fprintf(stderr, "planning for an NVIDIA card with %s at %s, not this machine's GPUs: nothing is saved\n", runner.HumanBytes(card.VRAMTotalBytes), bw)
	}
	var results []setupResult
	for _, d := range found {
		res, err := setupModel(c, st, machine, gpuHere, d, f.recalibrate, !f.asJSON, opts)
		if err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", d.Name, err)
			continue
		}
		results = append(results, res)
	}
	if len(results) == 0 {
		return fmt.Errorf("setup: no model could be set up")
	}
	save := card == nil && (f.yes || (!f.asJSON && ask(c, fmt.Sprintf("Save these settings to %s? [Y/n] ", st.SettingsPath()))))
	if save {
		chosen := map[string]runner.ModelSettings{}
		for i := range results {
			if results[i].Fit != runner.NoFit {
				chosen[results[i].fingerprint] = results[i].settings
				results[i].SettingsFile = st.SettingsPath()
			}
		}
		if err := runner.SaveSettings(st, chosen); err != nil {
			return fmt.Errorf("setup: %w", err)
		}
		fmt.Fprintf(stderr, "saved the settings of %d model(s) to %s\n", len(chosen), st.SettingsPath())
	}
	if f.asJSON {
		enc := json.NewEncoder(c.OutOrStdout())
		enc.SetEscapeHTML(false)
		for _, r := range results {
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// findModels are the models to set up: those given, else the embedded
// model and the user's pulled, ollama and LM Studio models.
func findModels(f setupFlags) ([]discover.Model, error) {
	p := discover.Places{Paths: f.models}
	if f.dir != "" {
		p.Paths = append(p.Paths, f.dir)
	}
	if len(p.Paths) > 0 {
		return discover.Find(p)
	}
	home, _ := os.UserHomeDir()
	found, err := discover.Find(discover.UserPlaces(home))
	if err != nil {
		return nil, err
	}
	return append([]discover.Model{{Name: "the embedded model", Source: "embedded"}}, found...), nil
}

// setupModel calibrates a model where needed, fits it and shows the fit.
func setupModel(c *cobra.Command, st *store.Store, machine probe.Report, gpuHere bool, d discover.Model, recalibrate, table bool, opts runner.FitOptions) (setupResult, error) {
	stderr := c.ErrOrStderr()
	m, err := runner.OpenModel(d.Path)
	if err != nil {
		return setupResult{}, err
	}
	defer m.Close()
	threads := max(1, machine.CPU.Cores)
	h, _ := runner.History(st, m.Fingerprint)
	ratio, runs := runner.Drift(h)
	cal, ok := runner.CachedCalibration(st, m, threads)
	if drifted := runs > 0 && math.Abs(ratio-1) > runner.MaxDrift; !ok || recalibrate || drifted {
		if drifted {
			fmt.Fprintf(stderr, "%s: measured at %.2f× the prediction over %d runs: calibrating again\n", d.Name, ratio, runs)
		}
		bar := newProgress(stderr, "calibrating "+m.Name, 1)
		cal, err = runner.Calibrate(m, st, threads, gpuHere, func(s runner.Step) {
			bar.total = s.Total
			bar.update(s.Done, s.What)
		})
		bar.finish()
		if err != nil {
			return setupResult{}, err
		}
	}
	fit := runner.PlanFitWith(m, machine, &cal, st, opts)
	res := setupResult{Model: d.Name, Path: d.Path, Source: d.Source, Placement: fit.Placement, Memory: memoryOf(fit.Budget),
		Fit: fit.Verdict, Reason: fit.Reason, Predicted: fit.Predicted, Runs: runs, Drift: ratio, GPUs: fit.GPUs,
		fingerprint: m.Fingerprint, settings: runner.SettingsFor(fit)}
	if d.Source == "embedded" {
		res.Model, res.Path = m.Name+" (embedded)", ""
	}
	if table {
		printFit(c.OutOrStdout(), res, fit.Budget)
	}
	return res, nil
}

// printFit writes a model's fit table.
func printFit(w io.Writer, r setupResult, b runner.Budget) {
	p, pr := r.Placement, r.Predicted
	fmt.Fprintf(w, "\n%s  [%s]\n", r.Model, r.Source)
	fmt.Fprintf(w, "  fit        %s: %s\n", r.Fit, r.Reason)
	for _, part := range b.Parts {
		fmt.Fprintf(w, "  %-10s %10s  %s\n", part.Name, runner.HumanBytes(part.Bytes), part.Device)
	}
	fmt.Fprintf(w, "  in all     %10s of %s available on the CPU", runner.HumanBytes(b.CPU()), runner.HumanBytes(b.Available))
	if b.GPUFree > 0 {
		fmt.Fprintf(w, ", %s of %s free on the GPU", runner.HumanBytes(b.GPU()), runner.HumanBytes(b.GPUFree))
	}
	fmt.Fprintln(w)
	for _, g := range r.GPUs {
		printGPUPlan(w, g)
	}
	if r.Fit == runner.NoFit {
		return
	}
	fmt.Fprintf(w, "  placement  %d threads, context %d, draft on %s, trainer on %s, %d target layers on the GPU, tree k %d depth %d γ %d\n",
		p.Threads, p.Ctx, p.DraftDevice, p.TrainerDevice, p.GPULayers, p.Tree.TopK, p.Tree.Depth, p.Tree.Tokens)
	printPrediction(w, pr, p.GPULayers)
	if r.Runs > 0 {
		fmt.Fprintf(w, "  measured   %.2f× the prediction over the last %d runs\n", r.Drift, r.Runs)
	}
}

// printPrediction writes a model's predicted speeds: alone and with the
// draft (today's, or at the τ --tau asked for), and over the target alone
// on the CPU where layers went to the GPU or a τ was asked for.
func printPrediction(w io.Writer, pr runner.Prediction, layers int) {
	if pr.Plain <= 0 {
		return
	}
	if pr.TauHigh > 0 {
		fmt.Fprintf(w, "  predicted  %.1f tokens/s alone → %.1f with the draft at τ %.2f–%.2f (%.1f–%.1f; the tree's τ %.2f at the middle)\n",
			pr.Plain, pr.WithDraft, pr.TauLow, pr.TauHigh, pr.Low, pr.High, pr.Tau)
	} else {
		fmt.Fprintf(w, "  predicted  %.1f tokens/s alone → %.1f with the draft today (τ %.2f), %.1f–%.1f\n",
			pr.Plain, pr.WithDraft, pr.Tau, pr.Low, pr.High)
	}
	if layers > 0 || pr.TauHigh > 0 {
		fmt.Fprintf(w, "  speedup    %.2f× alone, %.2f× with the draft (%.2f–%.2f×), over %.1f tokens/s with every layer on the CPU\n",
			pr.SpeedupPlain, pr.Speedup, pr.SpeedupLow, pr.SpeedupHigh, pr.CPUOnly)
	}
}

// printGPUPlan writes a GPU's arithmetic: free, less the reserve and
// what went before the layers, less the layers, and why no more went.
func printGPUPlan(w io.Writer, g runner.GPUPlan) {
	h := runner.HumanBytes
	head := "the head " + h(g.HeadBytes)
	if g.HeadLent {
		head = "the final norm " + h(g.HeadBytes) + ", the LM head the draft's"
	}
	fmt.Fprintf(w, "  gpu        %s free − %s reserve − %s draft − %s trainer − %s layers (%d, with %s and scratch %s) = %s left: %s\n",
		h(g.FreeBytes), h(g.ReserveBytes), h(g.DraftBytes), h(g.TrainerBytes), h(g.LayersBytes), g.GPULayers, head, h(g.ScratchBytes),
		h(g.LeftBytes), g.Stop)
}

// ask asks a yes/no question on stderr, yes by default; no answer (end of
// input) is no.
func ask(c *cobra.Command, question string) bool {
	fmt.Fprint(c.ErrOrStderr(), question)
	line, err := bufio.NewReader(c.InOrStdin()).ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(c.ErrOrStderr())
		return false
	}
	a := strings.ToLower(strings.TrimSpace(line))
	return a == "" || a == "y" || a == "yes"
}
