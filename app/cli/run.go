package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"dovetail/cpu"
	"dovetail/engine"
)

type runFlags struct {
	model         string
	prompt        string
	n             int
	temp          float32
	topP          float32
	topK          int
	minP          float32
	repeatPenalty float32
	seed          int64
	threads       int
	ctx           int
	json          bool
	draft         string
	tree          engine.TreeParams
	adapt         adaptFlags
	plan          bool
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
	PromptTokensPerSec float64   `json:"prompt_tokens_per_s"`
	GenTokensPerSec    float64   `json:"gen_tokens_per_s"`
	Seed               uint64    `json:"seed"`
	StopReason         string    `json:"stop_reason"`
	Kernels            string    `json:"kernels"`
	Draft              string    `json:"draft"`
	DraftDevice        string    `json:"draft_device,omitempty"`
	Rounds             int       `json:"rounds"`
	Tau                float64   `json:"tau"`
	AcceptanceByDepth  []float64 `json:"acceptance_by_depth"`
	DraftMs            float64   `json:"draft_ms"`
	VerifyMs           float64   `json:"verify_ms"`
	DraftVersion       int       `json:"draft_version"`
	Adapt              string    `json:"adapt"`
	PlainSteps         int       `json:"plain_steps"`
	Recalled           int       `json:"recalled_rounds"`
	PredictedTokS      float64   `json:"predicted_tokens_per_s,omitempty"`
}

func newRunCmd() *cobra.Command {
	var f runFlags
	c := &cobra.Command{
		Use:   "run [-m MODEL.gguf] -p PROMPT",
		Short: "Generate text from a prompt",
		Long: "Generate text from a prompt and stream it to stdout; speeds go to stderr.\n" +
			"Without -m the embedded default model (TinyStories-656K) runs.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return run(c, f) },
	}
	fl := c.Flags()
	fl.StringVarP(&f.model, "model", "m", "", "GGUF model file (default: the embedded TinyStories-656K)")
	fl.StringVarP(&f.prompt, "prompt", "p", "", "prompt text")
	fl.IntVarP(&f.n, "n", "n", 256, "most tokens to generate (≤ 0: until the end of the context)")
	fl.Float32Var(&f.temp, "temp", 0.8, "temperature (0: greedy)")
	fl.Float32Var(&f.topP, "top-p", 0.95, "nucleus sampling: keep the smallest set of tokens with this much probability (1: off)")
	fl.IntVar(&f.topK, "top-k", 40, "keep the k most likely tokens (0: off)")
	fl.Float32Var(&f.minP, "min-p", 0.05, "drop tokens less likely than this fraction of the most likely (0: off)")
	fl.Float32Var(&f.repeatPenalty, "repeat-penalty", 1, "penalty for tokens among the last 64 (1: off)")
	fl.Int64Var(&f.seed, "seed", -1, "random seed (-1: a random one)")
	fl.IntVarP(&f.threads, "threads", "t", runtime.NumCPU(), "CPU threads")
	fl.IntVarP(&f.ctx, "ctx", "c", 0, "context length (0: the model's)")
	fl.BoolVar(&f.json, "json", false, "print one JSON object with the tokens, text and speeds instead of streaming")
	fl.StringVar(&f.draft, "draft", "auto", "speculative decoding: none, ngram (prompt lookup), model:PATH (a smaller GGUF of the same vocabulary), dgf:PATH, or auto (the best available)")
	fl.IntVar(&f.tree.TopK, "tree-k", engine.ServerTree.TopK, "draft tree: children per expanded node")
	fl.IntVar(&f.tree.Depth, "tree-depth", engine.ServerTree.Depth, "draft tree: expansion rounds")
	fl.IntVar(&f.tree.Tokens, "tree-tokens", engine.ServerTree.Tokens, "draft tree: most nodes verified per round (γ)")
	f.adapt.register(c)
	fl.BoolVar(&f.plan, "plan", true, "let the cost model choose the tree each round, and decode without drafting while drafting would be slower")
	return c
}

func run(c *cobra.Command, f runFlags) error {
	if f.prompt == "" {
		return usageError{fmt.Errorf("run: a prompt is required (-p TEXT)")}
	}
	if f.threads < 1 || f.threads > 1024 {
		return usageError{fmt.Errorf("run: --threads %d out of range [1, 1024]", f.threads)}
	}
	if f.ctx < 0 {
		return usageError{fmt.Errorf("run: --ctx %d must not be negative", f.ctx)}
	}
	seed := uint64(f.seed)
	if f.seed < 0 {
		seed = uint64(time.Now().UnixNano())
	}
	params := engine.SamplerParams{Temperature: f.temp, TopK: f.topK, TopP: f.topP, MinP: f.minP,
		RepeatPenalty: f.repeatPenalty, Seed: seed}
	if err := params.Validate(); err != nil {
		return usageError{fmt.Errorf("run: %v", err)}
	}
	if err := f.tree.Validate(); err != nil {
		return usageError{fmt.Errorf("run: %v", err)}
	}
	adapt, err := f.adapt.settings()
	if err != nil {
		return usageError{fmt.Errorf("run: %v", err)}
	}
	kname, err := checkKernels(c.ErrOrStderr())
	if err != nil {
		return err
	}
	lm, err := loadModel(f.model)
	if err != nil {
		return err
	}
	defer lm.Model.Close()
	pool := cpu.NewPool(f.threads)
	defer pool.Close()
	target := cpu.NewTarget(lm.Model, pool, f.ctx)
	drafter, closeDraft, err := drafterFor(f.draft, lm, pool, f.ctx, draftOptions{greedy: params.Temperature <= 0, adapt: adapt, warn: c.ErrOrStderr()})
	if err != nil {
		return err
	}
	defer closeDraft()
	var planner *engine.Planner
	if drafter != nil && f.plan {
		if planner, err = plannerFor(target, lm, kname, f.threads, f.tree.TopK, c.ErrOrStderr()); err != nil {
			return err
		}
	}
	prompt := lm.Tok.Encode(f.prompt, true, false)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	out := bufio.NewWriter(c.OutOrStdout())
	defer out.Flush()
	dec := lm.Tok.NewDecoder()
	var tokens []int
	var text strings.Builder // the continuation, leading space kept
	req := engine.Request{Prompt: prompt, MaxTokens: f.n, Sampler: params, Stop: lm.Tok.IsEOG, Drafter: drafter, Tree: f.tree, Planner: planner}
	st, err := engine.Generate(ctx, target, req, func(tok int) error {
		tokens = append(tokens, tok)
		piece := dec.Add(tok)
		text.WriteString(piece)
		if !f.json {
			out.WriteString(piece)
			out.Flush()
		}
		return nil
	})
	tail := dec.Flush()
	text.WriteString(tail)
	if err != nil && ctx.Err() == nil {
		return err
	}
	if f.json {
		res := runResult{Model: lm.Name, PromptTokens: prompt, Tokens: tokens, Text: text.String(),
			Stats: runStats{PromptTokensPerSec: st.PromptTokensPerSec(), GenTokensPerSec: st.GenTokensPerSec(), Seed: seed,
				StopReason: st.StopReason, Kernels: kname, Draft: draftName(drafter, f.draft), DraftDevice: draftDevice(drafter),
				Rounds: st.Rounds, Tau: st.Tau(),
				AcceptanceByDepth: st.AcceptanceByDepth(), DraftMs: ms(st.DraftTime), VerifyMs: ms(st.VerifyTime),
				DraftVersion: st.DraftVersion, Adapt: adaptMode(drafter), PlainSteps: st.PlainSteps,
				Recalled: st.Recalled}}
		if planner != nil {
			res.Stats.PredictedTokS = planner.PredictedTokensPerSec()
		}
		if tokens == nil {
			res.Tokens = []int{}
		}
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		return enc.Encode(res)
	}
	out.WriteString(tail + "\n")
	out.Flush()
	fmt.Fprintf(c.ErrOrStderr(), "prompt: %d tokens, %.1f tokens/s | generation: %d tokens, %.1f tokens/s | seed %d\n",
		st.PromptTokens, st.PromptTokensPerSec(), st.GenTokens, st.GenTokensPerSec(), seed)
	if drafter != nil {
		name := draftName(drafter, f.draft)
		if dev := draftDevice(drafter); dev != "" {
			name += " on " + dev
		}
		fmt.Fprintf(c.ErrOrStderr(), "speculative (%s): %d rounds, τ %.2f tokens/round, draft %.1f ms, verify %.1f ms\n",
			name, st.Rounds, st.Tau(), ms(st.DraftTime), ms(st.VerifyTime))
	}
	if planner != nil {
		fmt.Fprintf(c.ErrOrStderr(), "planner: predicted %.1f tokens/s, measured %.1f; %d steps decoded without a draft, %d rounds verified a remembered continuation alone\n",
			planner.PredictedTokensPerSec(), st.GenTokensPerSec(), st.PlainSteps, st.Recalled)
	}
	return nil
}

// adaptMode is how the drafter adapts: off for any but an adapting DGF
// draft.
func adaptMode(d engine.Drafter) string {
	if a := adaptiveOf(d); a != nil {
		return a.Mode().String()
	}
	return engine.AdaptOff.String()
}

// draftVersion is the version of an adapting draft's weights (0 for any
// other drafter: their weights never change).
func draftVersion(d engine.Drafter) int {
	if v, ok := d.(interface{ Version() int }); ok {
		return v.Version()
	}
	return 0
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// draftDevice names the device a DGF draft runs on, or "".
func draftDevice(d engine.Drafter) string {
	if n, ok := d.(interface{ Device() string }); ok {
		return n.Device()
	}
	return ""
}

func draftName(d engine.Drafter, spec string) string {
	if d == nil {
		return "none"
	}
	if n, ok := d.(interface{ Name() string }); ok {
		return n.Name()
	}
	return spec
}
