package cli

import (
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"dovetail/app/runner"
	"dovetail/app/runner/store"
	"dovetail/engine/adapt"
	"dovetail/engine/tree"
)

// modelFlags are what run and serve share: the model, how it runs and how
// it drafts.
type modelFlags struct {
	model   string
	threads int
	ctx     int
	draft   string
	tree    tree.Params
	plan    bool
	layers  string
	adapt   adaptFlags
}

func (f *modelFlags) register(c *cobra.Command, draftHelp string) {
	fl := c.Flags()
	fl.StringVarP(&f.model, "model", "m", "", "GGUF model file, or a model's name as 'dovetail list' shows it (default: the embedded TinyStories-656K)")
	fl.IntVarP(&f.threads, "threads", "t", runtime.NumCPU(), "CPU threads (at most the machine's logical CPUs)")
	fl.IntVarP(&f.ctx, "ctx", "c", 0, "context length (0: the model's; beyond its training length with a warning; at most 16777216)")
	fl.StringVar(&f.draft, "draft", "auto", draftHelp)
	fl.IntVar(&f.tree.TopK, "tree-k", tree.Server.TopK, "draft tree: children per expanded node")
	fl.IntVar(&f.tree.Depth, "tree-depth", tree.Server.Depth, "draft tree: expansion rounds")
	fl.IntVar(&f.tree.Tokens, "tree-tokens", tree.Server.Tokens, "draft tree: most nodes verified per round (γ)")
	fl.BoolVar(&f.plan, "plan", true, "let the cost model choose the tree each round, and decode without drafting while drafting would be slower")
	fl.StringVar(&f.layers, "gpu-layers", "auto", "the target's last layers (with its LM head) on the GPU: a number, 0 (none), or auto (as many as fit beside the draft)")
	f.adapt.register(c)
}

// draftHelp is --draft's help.
const draftHelp = "speculative decoding: none, ngram (prompt lookup), model:PATH (a smaller GGUF of the same vocabulary), " +
	"dgf:PATH (a Dovetail draft), eagle:PATH (a published EAGLE-1/2 or EAGLE-3 draft: a directory with config.json and " +
	"safetensors), scratch (a new one that learns), or auto (an EAGLE draft pulled for the model, else its saved or shipped " +
	"draft; with --adapt background, a new one that learns when it has none)"

// options turns the flags into the runner's options, notices going to
// stderr as they come.
func (f *modelFlags) options(stderr io.Writer) (runner.Options, error) {
	o := runner.DefaultOptions()
	a, err := f.adapt.settings()
	if err != nil {
		return o, usageError{err}
	}
	o.Threads, o.Ctx, o.Tree, o.Plan, o.Adapt = f.threads, f.ctx, f.tree, f.plan, a
	if f.threads < 1 {
		return o, usageError{fmt.Errorf("--threads %d must be at least 1", f.threads)}
	}
	// The runner's messages begin with the option's name: with "--" in
	// front they name the flag.
	if o.Draft, err = runner.ParseDraft(f.draft); err != nil {
		return o, usageError{fmt.Errorf("--%w", err)}
	}
	if o.Device, err = runner.ParseDevice(f.adapt.device); err != nil {
		return o, usageError{fmt.Errorf("--%w", err)}
	}
	if o.GPULayers, err = runner.ParseGPULayers(f.layers); err != nil {
		return o, usageError{err}
	}
	o.Notify = func(n runner.Notice) { fmt.Fprintln(stderr, n) }
	if err := o.Validate(); err != nil {
		return o, usageError{err}
	}
	return o, nil
}

// adaptFlags are the adaptation flags of run, serve and bench adapt, and
// --device, where their DGF draft runs.
type adaptFlags struct {
	mode, device                       string
	duty                               float64
	threads                            int
	noSave, noIdle                     bool
	saveTime                           time.Duration
	lr, anchor                         float32
	unroll, steps, window, batch, minR int
	memory                             int
	minGain, branches                  float64
}

func (f *adaptFlags) register(c *cobra.Command) {
	d := runner.DefaultAdapt()
	fl := c.Flags()
	fl.StringVar(&f.mode, "adapt", d.Mode.String(), "online adaptation of a DGF draft: background (a shadow copy trains on what the target verified and replaces the draft when better), per-request (a step per round on the request's own text, undone after), or off")
	fl.StringVar(&f.device, "device", "auto", "where a DGF draft runs and trains: auto (a CUDA GPU when there is one), cpu, or cuda[:N]")
	fl.Float64Var(&f.duty, "adapt-duty", d.Engine.Duty, "share of the time the trainer may compute while a request decodes (1: always)")
	fl.IntVar(&f.threads, "adapt-threads", d.Threads, "CPU threads of the trainer")
	fl.BoolVar(&f.noSave, "adapt-no-save", false, "keep nothing on disk: neither the adapted draft nor the text memory of your requests")
	fl.BoolVar(&f.noIdle, "adapt-no-idle", false, "a trainer on the CPU competes with decoding at normal priority (it learns sooner; decoding is slower) instead of computing on idle cores only")
	fl.DurationVar(&f.saveTime, "adapt-save-every", d.SaveEvery, "save the adapted draft this often while it improves (and at exit)")
	// The recipe: measured defaults (docs/measurements/adaptation.md,
	// "The defaults of adaptation"), flags for experiments.
	fl.Float32Var(&f.lr, "adapt-lr", d.LR, "adaptation: learning rate (AdamW)")
	fl.Float32Var(&f.anchor, "adapt-anchor", d.Anchor, "adaptation, per-request: weight λ of KL(q_start ‖ q)")
	fl.IntVar(&f.unroll, "adapt-unroll", d.Unroll, "adaptation: training-time-test steps")
	fl.IntVar(&f.steps, "adapt-steps", d.Engine.Steps, "adaptation: optimizer steps per training run")
	fl.IntVar(&f.window, "adapt-window", d.Engine.Window, "adaptation: positions per training window")
	fl.IntVar(&f.batch, "adapt-batch", d.Engine.Batch, "adaptation: windows per optimizer step")
	fl.IntVar(&f.minR, "adapt-min-records", d.Engine.Control.MinRecords, "adaptation: new positions before a training run")
	fl.Float64Var(&f.minGain, "adapt-min-gain", d.Engine.MinGain, "adaptation: simulated τ gain on held-out records needed to swap a new draft in")
	fl.Float64Var(&f.branches, "adapt-branches", d.Engine.Branches, "adaptation: share of training windows that end in a node the target rejected (0: rejected nodes are not kept)")
	fl.IntVar(&f.memory, "adapt-memory", d.Engine.MemoryTokens, "tokens of verified text (prompts and outputs) remembered and saved with the adapted draft, whose continuations every draft tree proposes (0: none)")
	for _, n := range []string{"adapt-lr", "adapt-anchor", "adapt-unroll", "adapt-steps", "adapt-window", "adapt-batch", "adapt-min-records", "adapt-min-gain", "adapt-branches"} {
		fl.Lookup(n).Hidden = true
	}
}

// settings are the runner's adaptation settings the flags ask for.
func (f *adaptFlags) settings() (runner.Adapt, error) {
	a := runner.DefaultAdapt()
	var err error
	if a.Mode, err = adapt.ParseMode(f.mode); err != nil {
		return a, err
	}
	a.Engine.Duty, a.Threads, a.Save, a.SaveEvery, a.Idle = f.duty, f.threads, !f.noSave, f.saveTime, !f.noIdle
	a.Engine.Branches, a.Engine.MemoryTokens = f.branches, f.memory
	a.LR, a.Anchor, a.Unroll = f.lr, f.anchor, f.unroll
	a.Engine.Steps, a.Engine.Window, a.Engine.Batch, a.Engine.Control.MinRecords, a.Engine.MinGain = f.steps, f.window, f.batch, f.minR, f.minGain
	return a, a.Validate()
}

// applySettings starts o from the settings setup saved for m, where the
// user gave no flag, and says which it used.
func applySettings(c *cobra.Command, o *runner.Options, m *runner.Model) error {
	st, err := store.Open()
	if err != nil {
		return nil // nowhere to read them from: the defaults stand
	}
	s, err := runner.LoadSettings(st)
	if err != nil {
		fmt.Fprintf(c.ErrOrStderr(), "warning: ignoring the settings: %v\n", err)
		return nil
	}
	ms, ok := s.Models[m.Fingerprint]
	if !ok {
		return nil
	}
	fl := c.Flags()
	flags := map[string][]string{"threads": {"threads"}, "ctx": {"ctx"}, "draft": {"draft"}, "device": {"device"}, "gpu layers": {"gpu-layers"},
		"tree": {"tree-k", "tree-depth", "tree-tokens"}, "plan": {"plan"}}
	given := func(option string) bool {
		for _, name := range flags[option] {
			if f := fl.Lookup(name); f != nil && f.Changed {
				return true
			}
		}
		return false
	}
	if used := ms.Apply(o, given); len(used) > 0 {
		fmt.Fprintf(c.ErrOrStderr(), "settings: %s (from %s; flags override)\n", strings.Join(used, ", "), st.SettingsPath())
	}
	if err := o.Validate(); err != nil {
		return usageError{fmt.Errorf("the settings in %s: %v", st.SettingsPath(), err)}
	}
	return nil
}
