package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"dovetail/app/runner"
	"dovetail/engine"
)

type runFlags struct {
	modelFlags
	sampling
	prompt    string
	n         int
	ignoreEOS bool
	json      bool
}

// runResult is the --json output.
type runResult struct {
	Model        string   `json:"model"`
	PromptTokens []int    `json:"prompt_tokens"`
	Tokens       []int    `json:"tokens"`
	Text         string   `json:"text"`
	Stats        runStats `json:"stats"`
}

type runStats struct {
	PromptTokensPerSec float64     `json:"prompt_tokens_per_s"`
	GenTokensPerSec    float64     `json:"gen_tokens_per_s"`
	Seed               uint64      `json:"seed"`
	StopReason         string      `json:"stop_reason"`
	Kernels            string      `json:"kernels"`
	Threads            int         `json:"threads"`
	Ctx                int         `json:"ctx"`
	Draft              string      `json:"draft"`
	DraftDevice        string      `json:"draft_device,omitempty"`
	Rounds             int         `json:"rounds"`
	Tau                float64     `json:"tau"`
	AcceptanceByDepth  []float64   `json:"acceptance_by_depth"`
	DraftMs            float64     `json:"draft_ms"`
	VerifyMs           float64     `json:"verify_ms"`
	DraftVersion       int         `json:"draft_version"`
	Adapt              string      `json:"adapt"`
	PlainSteps         int         `json:"plain_steps"`
	Recalled           int         `json:"recalled_rounds"`
	PredictedTokS      float64     `json:"predicted_tokens_per_s,omitempty"`
	Memory             memoryStats `json:"memory"`
}

// memoryStats is the runner's memory budget as --json reports it.
type memoryStats struct {
	CPUBytes       uint64        `json:"cpu_bytes"`
	GPUBytes       uint64        `json:"gpu_bytes"`
	AvailableBytes uint64        `json:"available_bytes"`
	HeapLimitBytes uint64        `json:"heap_limit_bytes,omitempty"` // the Go heap's soft limit the runner set
	Parts          []runner.Part `json:"parts"`
}

func memoryOf(b runner.Budget) memoryStats {
	return memoryStats{CPUBytes: b.CPU(), GPUBytes: b.GPU(), AvailableBytes: b.Available, HeapLimitBytes: b.HeapLimit, Parts: b.Parts}
}

func newRunCmd() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run [-m MODEL.gguf] -p PROMPT",
		Short: "Generate text from a prompt",
		Long: "Generate text from a prompt and stream it to stdout; speeds go to stderr.\n" +
			"Without -m the embedded default model (TinyStories-656K) runs. -p - reads the\n" +
			"prompt from standard input. Ctrl-C stops generation (exit status 130).",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return run(c, f) },
	}
	f.modelFlags.register(c, draftHelp)
	fl := c.Flags()
	fl.StringVarP(&f.prompt, "prompt", "p", "", "prompt text (-: read it from standard input)")
	fl.IntVarP(&f.n, "n", "n", 256, "most tokens to generate (≤ 0: until the end of the context)")
	fl.BoolVar(&f.ignoreEOS, "ignore-eos", false, "go on past the model's end-of-text tokens (for measuring speed), as llama.cpp's flag")
	f.sampling.register(c)
	fl.BoolVar(&f.json, "json", false, "print one JSON object with the tokens, text and speeds instead of streaming")
	return c
}

// readPrompt is -p's text, or standard input's for -p -.
func readPrompt(c *cobra.Command, p string) (string, error) {
	if p != "-" {
		return p, nil
	}
	b, err := io.ReadAll(io.LimitReader(c.InOrStdin(), 64<<20))
	if err != nil {
		return "", fmt.Errorf("reading the prompt from standard input: %w", err)
	}
	return strings.TrimRight(string(b), "\n"), nil
}

func run(c *cobra.Command, f runFlags) error {
	prompt, err := readPrompt(c, f.prompt)
	if err != nil {
		return err
	}
	if prompt == "" {
		return usageError{fmt.Errorf("run: a prompt is required (-p TEXT, or -p - to read it from standard input)")}
	}
	params, err := f.params()
	if err != nil {
		return usageError{fmt.Errorf("run: %v", err)}
	}
	seed := params.Seed
	o, err := f.options(c.ErrOrStderr())
	if err != nil {
		return err
	}
	o.Greedy = params.Temperature <= 0
	m, r, done, err := openRunner(c, f.model, &o)
	if err != nil {
		return err
	}
	defer done()

	ctx, stop := interruptible()
	defer stop()
	out := bufio.NewWriter(c.OutOrStdout())
	defer out.Flush()
	ids := m.Tok.Encode(prompt, true, false)
	req := runner.TextRequest{Prompt: ids, IgnoreEOS: f.ignoreEOS}
	req.Sampler, req.Stops, req.MaxTokens = withModelParams(runner.ModelParams("", m.Path), params, f.n, flagSets(c))
	seed = req.Sampler.Seed
	if !f.json {
		req.OnText = func(p runner.Piece) error {
			out.WriteString(p.Text)
			out.Flush()
			return nil
		}
	}
	res, err := r.Slot(0).GenerateText(ctx, req)
	if err != nil && ctx.Err() == nil {
		return err
	}
	if f.json {
		if err := writeRunJSON(out, r, ids, res.Tokens, res.Text, res.Stats, seed); err != nil {
			return err
		}
	} else {
		out.WriteString("\n")
		out.Flush()
		reportRun(c.ErrOrStderr(), r, res.Stats, seed)
	}
	if ctx.Err() != nil {
		return errInterrupted
	}
	return nil
}

// openModel opens a model, saying what a user should know about it.
func openModel(c *cobra.Command, name string) (*runner.Model, error) {
	path, as, err := modelPath(name)
	if err != nil {
		return nil, err
	}
	m, err := runner.OpenModel(path)
	if err != nil {
		return nil, err
	}
	if as != "" {
		m.Name = as
	}
	if m.KernelNotice != "" {
		fmt.Fprintln(c.ErrOrStderr(), "dovetail: "+m.KernelNotice)
	}
	return m, nil
}

// openRunner opens the model at path, applies its saved settings to o
// and builds its runner; done closes both, saying what could not be saved.
func openRunner(c *cobra.Command, path string, o *runner.Options) (m *runner.Model, r *runner.Runner, done func(), err error) {
	if m, err = openModel(c, path); err != nil {
		return nil, nil, nil, err
	}
	if err = applySettings(c, o, m); err == nil {
		r, err = runner.New(m, *o)
	}
	if err != nil {
		m.Close()
		return nil, nil, nil, err
	}
	return m, r, func() { closeRunner(c, r); m.Close() }, nil
}

// closeRunner closes r, saying what could not be saved.
func closeRunner(c *cobra.Command, r *runner.Runner) {
	if err := r.Close(); err != nil {
		fmt.Fprintf(c.ErrOrStderr(), "warning: %v\n", err)
	}
}

func writeRunJSON(out io.Writer, r *runner.Runner, prompt, tokens []int, text string, st engine.Stats, seed uint64) error {
	info := r.Draft()
	res := runResult{Model: r.Model().Name, PromptTokens: prompt, Tokens: tokens, Text: text,
		Stats: runStats{PromptTokensPerSec: st.PromptTokensPerSec(), GenTokensPerSec: st.GenTokensPerSec(), Seed: seed,
			StopReason: st.StopReason, Kernels: r.Model().Kernels, Threads: r.Threads(), Ctx: r.Context(),
			Draft: info.Name, DraftDevice: info.Device, Rounds: st.Rounds, Tau: st.Tau(),
			AcceptanceByDepth: st.AcceptanceByDepth(), DraftMs: ms(st.DraftTime), VerifyMs: ms(st.VerifyTime),
			DraftVersion: st.DraftVersion, Adapt: info.Adapt.String(), PlainSteps: st.PlainSteps,
			Recalled: st.Recalled, Memory: memoryOf(r.Budget())}}
	// As reportRun: a request that ran without its draft (a new one not
	// started yet) was not planned.
	if p := r.Planner(); p != nil && st.Rounds+st.PlainSteps+st.Recalled > 0 {
		res.Stats.PredictedTokS = p.PredictedTokensPerSec()
	}
	if tokens == nil {
		res.Tokens = []int{}
	}
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	return enc.Encode(res)
}

// reportRun writes a generation's speeds and drafting to stderr.
func reportRun(w io.Writer, r *runner.Runner, st engine.Stats, seed uint64) {
	fmt.Fprintf(w, "prompt: %d tokens, %.1f tokens/s | generation: %d tokens, %.1f tokens/s | seed %d\n",
		st.PromptTokens, st.PromptTokensPerSec(), st.GenTokens, st.GenTokensPerSec(), seed)
	info := r.Draft()
	drafted := st.Rounds+st.PlainSteps+st.Recalled > 0
	if info.Name != "none" {
		name := info.Name
		if info.Device != "" {
			name += " on " + info.Device
		}
		if !drafted && info.Name == "dgf:untrained" {
			fmt.Fprintf(w, "speculative (%s): not in this request: a new draft starts once the model is idle, and learns from the requests after\n", name)
		} else {
			fmt.Fprintf(w, "speculative (%s): %d rounds, τ %.2f tokens/round, draft %.1f ms, verify %.1f ms\n",
				name, st.Rounds, st.Tau(), ms(st.DraftTime), ms(st.VerifyTime))
		}
	}
	if p := r.Planner(); p != nil && drafted {
		fmt.Fprintf(w, "planner: predicted %.1f tokens/s, measured %.1f; %d steps decoded without a draft, %d rounds verified a remembered continuation alone\n",
			p.PredictedTokensPerSec(), st.GenTokensPerSec(), st.PlainSteps, st.Recalled)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
