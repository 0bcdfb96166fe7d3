package cli

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"

	"github.com/spf13/cobra"

	"dovetail/app/runner"
)

// benchResult is the --json output of dovetail bench.
type benchResult struct {
	Model         string             `json:"model"`
	Kernels       string             `json:"kernels"`
	Threads       int                `json:"threads"`
	Depth         int                `json:"depth"`
	PrefillTokS   float64            `json:"prefill_tok_s"`
	DecodeTokS    float64            `json:"decode_tok_s"`
	VerifyRatio   map[string]float64 `json:"verify_ratio"`
	BandwidthGBs  float64            `json:"bandwidth_gb_s"`
	RooflineShare float64            `json:"roofline_share"`
	WeightBytes   int64              `json:"weight_bytes_per_token"`
	GPULayers     int                `json:"gpu_layers,omitempty"`
	GPU           string             `json:"gpu,omitempty"`
}

func newBenchCmd() *cobra.Command {
	var model string
	var threads, reps, depth, gpuLayers int
	var asJSON bool
	c := &cobra.Command{
		Use:   "bench [-m MODEL] [--threads N] [--depth N] [--json]",
		Short: "Measure prefill and decode speed, tree verification cost T_V(n)/T_T and the read of the weights",
		Long: "Measure prefill (64 tokens) and decode (64 tokens) speed, the cost of verifying n draft\n" +
			"tokens in one forward relative to one decode step, T_V(n)/T_T for n = 1..64, and how fast the\n" +
			"threads read the weights one decode step reads (nothing else, as decoding reads them), and print\n" +
			"decode speed as a share of that roofline. --depth N measures them after N tokens of context\n" +
			"(attention's share grows with it). --gpu-layers N runs the target's last N layers and its LM head on\n" +
			"the GPU, as run's flag does, and measures the split (its costs, not a roofline).",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if threads < 1 || threads > runtime.NumCPU() {
				return usageError{fmt.Errorf("bench: --threads %d out of range: this machine has %d logical CPUs", threads, runtime.NumCPU())}
			}
			if reps < 1 || reps > 10000 {
				return usageError{fmt.Errorf("bench: --reps %d out of range [1, 10000]", reps)}
			}
			if depth < 0 {
				return usageError{fmt.Errorf("bench: --depth %d: the context depth must be 0 or more tokens", depth)}
			}
			if gpuLayers < 0 {
				return usageError{fmt.Errorf("bench: --gpu-layers %d: the number of layers must be 0 or more", gpuLayers)}
			}
			m, err := openModel(c, model)
			if err != nil {
				return err
			}
			defer m.Close()
			b, err := runner.Bench(m, threads, reps, depth, gpuLayers)
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			res := benchResult{Model: m.Name, Kernels: b.Kernels, Threads: threads, Depth: depth, PrefillTokS: b.PrefillTokS,
				DecodeTokS: b.DecodeTokS, VerifyRatio: map[string]float64{}, BandwidthGBs: b.BandwidthGBs,
				RooflineShare: b.RooflineShare, WeightBytes: b.WeightBytes, GPULayers: b.GPULayers, GPU: b.GPU}
			for n, v := range b.VerifyRatio {
				res.VerifyRatio[strconv.Itoa(n)] = v
			}
			out := c.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
			fmt.Fprintf(out, "model %s, kernels %s, %d threads", res.Model, res.Kernels, threads)
			if depth > 0 {
				fmt.Fprintf(out, ", after %d tokens of context", depth)
			}
			fmt.Fprintln(out)
			fmt.Fprintf(out, "prefill  %8.1f tokens/s (64 tokens)\n", res.PrefillTokS)
			fmt.Fprintf(out, "decode   %8.1f tokens/s (64 tokens), %.1f MB of weights per token\n", res.DecodeTokS, float64(res.WeightBytes)/1e6)
			if res.GPULayers > 0 {
				fmt.Fprintf(out, "gpu      the last %d layers and the LM head on %s\n", res.GPULayers, res.GPU)
			} else {
				fmt.Fprintf(out, "weights  %8.1f GB/s read; decode at %.0f%% of the roofline\n", res.BandwidthGBs, 100*res.RooflineShare)
			}
			fmt.Fprintf(out, "T_V(n)/T_T:")
			for _, n := range runner.BenchSizes {
				fmt.Fprintf(out, "  %d: %.2f", n, b.VerifyRatio[n])
			}
			fmt.Fprintln(out)
			return nil
		},
	}
	fl := c.Flags()
	fl.StringVarP(&model, "model", "m", "", "GGUF model file (default: the embedded model)")
	fl.IntVarP(&threads, "threads", "t", runtime.NumCPU(), "CPU threads")
	fl.IntVar(&reps, "reps", 9, "repetitions of the prefill and of each verification size (the median is kept)")
	fl.IntVar(&depth, "depth", 0, "tokens of context before the measurements")
	fl.IntVar(&gpuLayers, "gpu-layers", 0, "the target's last layers (with its LM head) on the GPU (0: none)")
	fl.BoolVar(&asJSON, "json", false, "print one JSON object")
	c.AddCommand(newBenchAdaptCmd(), newBenchLoadCmd())
	return c
}
