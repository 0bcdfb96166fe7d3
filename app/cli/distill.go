package cli

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"dovetail/app/runner"
	"dovetail/app/runner/distill"
)

type distillFlags struct {
	model  string
	device string
	o      distill.Options
}

func newDistillCmd() *cobra.Command {
	var f distillFlags
	c := &cobra.Command{
		Use:   "distill [-m TARGET.gguf] (--corpus FILE|DIR | --self N) -o DRAFT.gguf",
		Short: "Train a Dovetail (DGF) draft model for a target from text",
		Long: "Train a Dovetail draft (DGF + M decoder blocks, the target's embeddings and LM head shared)\n" +
			"to predict the target's next hidden state, from the target's own features on a corpus.\n" +
			"--self N first generates N samples from the target itself (varied prompts, seeds and\n" +
			"temperatures; kept in DRAFT.gguf.self.txt, which a later run continues, saying so, and\n" +
			"--fresh makes anew) and trains on those, the usual way when the target's training data is\n" +
			"unknown. Progress, loss, top-1 agreement with the target and\n" +
			"ETA go to stderr. Ctrl-C saves a resume checkpoint (DRAFT.gguf.resume): the same command\n" +
			"continues from it. An existing DRAFT.gguf is not overwritten without --force. --install\n" +
			"also saves the draft where `run --draft auto` finds it (<user config dir>/dovetail/drafts/\n" +
			"<target fingerprint>.gguf), keeping the one it replaces: `dovetail drafts restore` brings it back.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return runDistill(c, &f) },
	}
	d := distill.Defaults()
	fl := c.Flags()
	fl.StringVarP(&f.model, "model", "m", "", "target GGUF model (default: the embedded TinyStories-656K)")
	fl.StringVar(&f.o.Corpus, "corpus", "", "text file, or directory of text files; documents separated by <|endoftext|>")
	fl.IntVar(&f.o.Self, "self", 0, "first generate this many samples from the target and train on them")
	fl.IntVar(&f.o.SelfLen, "self-len", d.SelfLen, "most tokens per generated sample")
	fl.Float32Var(&f.o.SelfTemp, "self-temp", d.SelfTemp, "generated samples' temperatures spread over [0, x] (the first of each prompt greedy)")
	fl.StringVarP(&f.o.Out, "output", "o", "", "draft checkpoint to write (GGUF)")
	fl.IntVar(&f.o.Blocks, "blocks", d.Blocks, "decoder blocks after the DGF (M, 1 to 16)")
	fl.IntVar(&f.o.FFN, "ffn", d.FFN, "MLP width of the blocks (0: the target's)")
	fl.IntVar(&f.o.Steps, "steps", d.Steps, "optimizer steps (0: --epochs)")
	fl.Float64Var(&f.o.Epochs, "epochs", d.Epochs, "passes over the corpus when --steps is 0")
	fl.Float32Var(&f.o.LR, "lr", d.LR, "peak learning rate (AdamW β 0.9/0.95, cosine decay to a tenth)")
	fl.IntVar(&f.o.Warmup, "warmup", d.Warmup, "learning-rate warm-up steps")
	fl.IntVar(&f.o.SeqLen, "seq-len", d.SeqLen, "positions per training window")
	fl.IntVar(&f.o.Batch, "batch", d.Batch, "positions per optimizer step")
	fl.IntVar(&f.o.Unroll, "unroll", d.Unroll, "training-time test: draft steps unrolled on the draft's own features (loss weights 0.8^i)")
	fl.Float32Var(&f.o.Noise, "noise", d.Noise, "uniform noise ±x added to the input features")
	fl.Float32Var(&f.o.CEWeight, "ce-weight", d.CEWeight, "weight of the soft cross-entropy on the LM head's output (EAGLE: 0.1)")
	fl.Float32Var(&f.o.FeatWeight, "feature-weight", d.FeatWeight, "weight of SmoothL1 on the predicted features (EAGLE: 1)")
	fl.Float64Var(&f.o.EvalFrac, "eval", d.EvalFrac, "share of the corpus held out for evaluation")
	fl.Int64Var(&f.o.Seed, "seed", d.Seed, "random seed (initialization, data order, samples)")
	fl.IntVarP(&f.o.Threads, "threads", "t", runtime.NumCPU(), "CPU threads")
	fl.StringVar(&f.device, "device", d.Device.String(), "where the draft trains: auto (a CUDA GPU when there is one and the draft is large), cpu, or cuda[:N]")
	fl.BoolVar(&f.o.Fresh, "fresh", false, "start over: no resume checkpoint, and new --self samples in place of those kept in DRAFT.gguf.self.txt")
	fl.BoolVar(&f.o.Install, "install", false, "also save the draft where 'run --draft auto' looks for this target's draft (the one it replaces is kept: 'dovetail drafts restore')")
	fl.BoolVar(&f.o.Force, "force", false, "overwrite an existing output file")
	fl.DurationVar(&f.o.SaveEvery, "save-every", d.SaveEvery, "how often to write checkpoints while training")
	fl.IntVar(&f.o.StopAfter, "stop-after", 0, "")
	fl.MarkHidden("stop-after")
	return c
}

func runDistill(c *cobra.Command, f *distillFlags) error {
	var err error
	if f.o.Device, err = runner.ParseDevice(f.device); err != nil {
		return usageError{fmt.Errorf("distill: --%v", err)}
	}
	if err := f.o.Validate(); err != nil {
		return usageError{fmt.Errorf("distill: %v", err)}
	}
	stderr := c.ErrOrStderr()
	m, err := openModel(c, f.model)
	if err != nil {
		return err
	}
	defer m.Close()
	ctx, stop := interruptible()
	defer stop()
	bars := map[string]*progress{}
	onProgress := func(p distill.Progress) {
		b := bars[p.Phase]
		if b == nil {
			b = newProgress(stderr, p.Phase, p.Total)
			b.done = p.Done
			bars[p.Phase] = b
		}
		if p.Finished {
			b.finish()
			return
		}
		b.update(p.Done, p.Info)
	}
	res, err := distill.Run(ctx, m, f.o, onProgress, func(n runner.Notice) { fmt.Fprintln(stderr, n) })
	var intr *distill.Interrupted
	switch {
	case errors.As(err, &intr):
		return interrupted{err}
	case errors.Is(err, distill.ErrUsage):
		return usageError{fmt.Errorf("distill: %v", strings.TrimPrefix(err.Error(), distill.ErrUsage.Error()+": "))}
	case err != nil:
		return err
	}
	if res.Installed != "" {
		fmt.Fprintf(stderr, "installed as %s (run --draft auto uses it)\n", res.Installed)
		if res.Replaced {
			fmt.Fprintf(stderr, "the draft it replaced is kept: `dovetail drafts restore %s` brings it back\n", m.Fingerprint)
		}
	}
	fmt.Fprintf(stderr, "wrote %s\n", res.Path)
	return nil
}

// progress draws a one-line progress bar with an ETA on stderr.
type progress struct {
	w           io.Writer
	label       string
	total, done int
	first       int
	start, last time.Time
	drawn       bool
}

func newProgress(w io.Writer, label string, total int) *progress {
	return &progress{w: w, label: label, total: total, start: time.Now(), first: -1}
}

func (p *progress) update(done int, info string) {
	if p.first < 0 {
		p.first, p.start = p.done, time.Now()
	}
	p.done = done
	now := time.Now()
	if now.Sub(p.last) < 200*time.Millisecond && done < p.total {
		return
	}
	p.last = now
	frac := float64(done) / float64(max(1, p.total))
	const width = 24
	fill := int(frac * width)
	bar := strings.Repeat("=", fill) + strings.Repeat(" ", width-fill)
	eta := "?"
	if d := done - p.first; d > 0 {
		left := time.Duration(float64(now.Sub(p.start)) / float64(d) * float64(p.total-done))
		eta = left.Round(time.Second).String()
	}
	fmt.Fprintf(p.w, "\r%s [%s] %3.0f%% %d/%d  %s  ETA %s   ", p.label, bar, 100*frac, done, p.total, info, eta)
	p.drawn = true
}

func (p *progress) finish() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}
