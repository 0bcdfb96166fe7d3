package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"dovetail/cpu"
	"dovetail/engine"
	"dovetail/gpu"
	"dovetail/models/draft"
)

type distillFlags struct {
	model, corpus, out string
	device             string
	self, selfLen      int
	selfTemp           float32
	blocks, ffn        int
	steps              int
	epochs             float64
	lr                 float32
	warmup             int
	seqLen, batch      int
	unroll             int
	noise, ceWeight    float32
	featWeight         float32
	evalFrac           float64
	seed               int64
	threads            int
	fresh, install     bool
	saveEvery          time.Duration
	stopAfter          int // tests: behave as if interrupted after this many steps
}

func newDistillCmd() *cobra.Command {
	var f distillFlags
	c := &cobra.Command{
		Use:   "distill [-m TARGET.gguf] (--corpus FILE|DIR | --self N) -o DRAFT.gguf",
		Short: "Train a Dovetail (DGF) draft model for a target from text",
		Long: "Train a Dovetail draft (DGF + M decoder blocks, the target's embeddings and LM head shared)\n" +
			"to predict the target's next hidden state, from the target's own features on a corpus.\n" +
			"--self N first generates N samples from the target itself (varied prompts, seeds and\n" +
			"temperatures; kept in DRAFT.gguf.self.txt) and trains on those, the usual way when the\n" +
			"target's training data is unknown. Progress, loss, top-1 agreement with the target and\n" +
			"ETA go to stderr. Ctrl-C saves a resume checkpoint (DRAFT.gguf.resume): the same command\n" +
			"continues from it. --install also saves the draft where `run --draft auto` finds it:\n" +
			"<user config dir>/dovetail/drafts/<target fingerprint>.gguf.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return distill(c, f) },
	}
	fl := c.Flags()
	fl.StringVarP(&f.model, "model", "m", "", "target GGUF model (default: the embedded TinyStories-656K)")
	fl.StringVar(&f.corpus, "corpus", "", "text file, or directory of text files; documents separated by <|endoftext|>")
	fl.IntVar(&f.self, "self", 0, "first generate this many samples from the target and train on them")
	fl.IntVar(&f.selfLen, "self-len", 256, "most tokens per generated sample")
	fl.Float32Var(&f.selfTemp, "self-temp", 1, "generated samples' temperatures spread over [0, x] (the first of each prompt greedy)")
	fl.StringVarP(&f.out, "output", "o", "", "draft checkpoint to write (GGUF)")
	fl.IntVar(&f.blocks, "blocks", 1, "decoder blocks after the DGF (M, 1 to 16)")
	fl.IntVar(&f.ffn, "ffn", 0, "MLP width of the blocks (0: the target's)")
	fl.IntVar(&f.steps, "steps", 0, "optimizer steps (0: --epochs)")
	fl.Float64Var(&f.epochs, "epochs", 1, "passes over the corpus when --steps is 0")
	fl.Float32Var(&f.lr, "lr", 1e-3, "peak learning rate (AdamW β 0.9/0.95, cosine decay to a tenth)")
	fl.IntVar(&f.warmup, "warmup", 50, "learning-rate warm-up steps")
	fl.IntVar(&f.seqLen, "seq-len", 256, "positions per training window")
	fl.IntVar(&f.batch, "batch", 2048, "positions per optimizer step")
	fl.IntVar(&f.unroll, "unroll", 1, "training-time test: draft steps unrolled on the draft's own features (loss weights 0.8^i)")
	fl.Float32Var(&f.noise, "noise", 0, "uniform noise ±x added to the input features")
	fl.Float32Var(&f.ceWeight, "ce-weight", 0.1, "weight of the soft cross-entropy on the LM head's output (EAGLE: 0.1)")
	fl.Float32Var(&f.featWeight, "feature-weight", 1, "weight of SmoothL1 on the predicted features (EAGLE: 1)")
	fl.Float64Var(&f.evalFrac, "eval", 0.05, "share of the corpus held out for evaluation")
	fl.Int64Var(&f.seed, "seed", 1, "random seed (initialization, data order, samples)")
	fl.IntVarP(&f.threads, "threads", "t", runtime.NumCPU(), "CPU threads")
	fl.StringVar(&f.device, "device", "auto", "where the draft trains: auto (a CUDA GPU when there is one and the draft is large), cpu, or cuda[:N]")
	fl.BoolVar(&f.fresh, "fresh", false, "start over even if a resume checkpoint exists")
	fl.BoolVar(&f.install, "install", false, "also save the draft where `run --draft auto` looks for this target's draft")
	fl.DurationVar(&f.saveEvery, "save-every", time.Minute, "how often to write checkpoints while training")
	fl.IntVar(&f.stopAfter, "stop-after", 0, "")
	fl.MarkHidden("stop-after")
	return c
}

func (f distillFlags) validate() error {
	switch {
	case f.out == "":
		return fmt.Errorf("distill: an output file is required (-o DRAFT.gguf)")
	case f.corpus == "" && f.self <= 0:
		return fmt.Errorf("distill: no training text: give --corpus FILE|DIR or --self N")
	case f.self < 0 || f.self > 1<<20 || f.selfLen < 2 || f.selfLen > 1<<16 || !(f.selfTemp >= 0) || f.selfTemp > 2:
		return fmt.Errorf("distill: --self %d, --self-len %d or --self-temp %g out of range", f.self, f.selfLen, f.selfTemp)
	case f.blocks < 1 || f.blocks > draft.MaxBlocks:
		return fmt.Errorf("distill: --blocks %d out of range [1, %d]", f.blocks, draft.MaxBlocks)
	case f.ffn < 0 || f.steps < 0 || !(f.epochs > 0) || f.warmup < 0:
		return fmt.Errorf("distill: --ffn, --steps, --epochs and --warmup must not be negative (and --epochs positive)")
	case !(f.lr > 0) || f.lr > 1:
		return fmt.Errorf("distill: --lr %g out of range (0, 1]", f.lr)
	case f.seqLen < 2 || f.batch < f.seqLen:
		return fmt.Errorf("distill: --seq-len %d must be at least 2 and --batch %d at least --seq-len", f.seqLen, f.batch)
	case f.unroll < 1 || f.unroll > 16:
		return fmt.Errorf("distill: --unroll %d out of range [1, 16]", f.unroll)
	case f.noise < 0 || f.ceWeight < 0 || f.featWeight < 0 || f.evalFrac < 0 || f.evalFrac >= 0.5:
		return fmt.Errorf("distill: --noise, --ce-weight and --feature-weight must not be negative, --eval must be in [0, 0.5)")
	case f.threads < 1 || f.threads > 1024:
		return fmt.Errorf("distill: --threads %d out of range [1, 1024]", f.threads)
	}
	return nil
}

// settings are the flags that shape training: a resume checkpoint made
// with others cannot continue this run.
func (f distillFlags) settings(total int) string {
	return fmt.Sprintf("corpus=%q self=%d self-len=%d self-temp=%g blocks=%d ffn=%d seq-len=%d batch=%d lr=%g warmup=%d unroll=%d noise=%g ce=%g feat=%g eval=%g seed=%d steps=%d",
		f.corpus, f.self, f.selfLen, f.selfTemp, f.blocks, f.ffn, f.seqLen, f.batch, f.lr, f.warmup, f.unroll, f.noise, f.ceWeight, f.featWeight, f.evalFrac, f.seed, total)
}

func distill(c *cobra.Command, f distillFlags) error {
	if err := f.validate(); err != nil {
		return usageError{err}
	}
	stderr := c.ErrOrStderr()
	if _, err := checkKernels(stderr); err != nil {
		return err
	}
	lm, err := loadModel(f.model)
	if err != nil {
		return err
	}
	defer lm.Model.Close()
	fp := draft.Fingerprint(lm.Model.File)
	pool := cpu.NewPool(f.threads)
	defer pool.Close()
	target := cpu.NewTarget(lm.Model, pool, 0)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	var docs []string
	if f.self > 0 {
		if docs, err = selfCorpus(ctx, f, lm, target, stderr); err != nil {
			return err
		}
	}
	if f.corpus != "" {
		more, err := readCorpus(f.corpus)
		if err != nil {
			return err
		}
		docs = append(docs, more...)
	}
	data := prepareData(docs, lm, target.Context(), f.seqLen, f.evalFrac)
	if data.trainPositions == 0 {
		return fmt.Errorf("distill: the corpus holds no text to train on (%d documents)", len(docs))
	}
	total := f.steps
	if total == 0 {
		total = data.stepsFor(f.epochs, f.batch, f.seqLen, uint64(f.seed))
	}

	cfg := draft.ForTarget(lm.Model.Config, f.blocks, f.ffn)
	dev, _, err := draftDevices(f.device, cfg, pool, f.threads, c.ErrOrStderr())
	if err != nil {
		return err
	}
	d, err := gpu.NewDraft(dev, cfg, lm.Model)
	if err != nil {
		return err
	}
	defer d.Free()
	tc := gpu.DefaultTrainConfig()
	tc.LR, tc.Warmup, tc.TotalSteps, tc.Unroll, tc.Noise, tc.Seed = f.lr, f.warmup, total, f.unroll, f.noise, uint64(f.seed)
	tc.ProbWeight, tc.FeatureWeight = f.ceWeight, f.featWeight
	st := &runState{}
	resumePath := f.out + ".resume"
	settings := f.settings(total)
	var resumeCk *draft.Checkpoint
	if !f.fresh {
		ck, err := draft.Load(resumePath)
		switch {
		case err == nil:
			if err := st.resume(ck, d, fp, filepath.Base(lm.Name), settings); err != nil {
				return err
			}
			tc.Seed += uint64(st.step) // fresh noise after the resume point
			resumeCk = ck
		case !errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%w (use --fresh to start over)", err)
		}
	}
	if resumeCk == nil {
		d.Init(uint64(f.seed))
	}
	tr, err := gpu.NewTrainer(d, tc, f.batch, f.seqLen)
	if err != nil {
		return err
	}
	defer tr.Free()
	if resumeCk != nil {
		if err := tr.Opt.Load(resumeCk); err != nil {
			return fmt.Errorf("%s: %w (use --fresh to start over)", resumePath, err)
		}
		fmt.Fprintf(stderr, "resuming from %s at step %d of %d\n", resumePath, st.step, total)
	}
	fmt.Fprintf(stderr, "distilling a DGF draft of %d block(s), %.2fM parameters, for %s on %s\n",
		cfg.Blocks, float64(cfg.Params())/1e6, lm.Name, dev.Name())
	fmt.Fprintf(stderr, "corpus: %d documents, %d training positions, %d held out; %d steps of up to %d positions\n",
		len(docs), data.trainPositions, data.evalPositions, total, f.batch)

	targetName := filepath.Base(lm.Name)
	save := func(final bool) error {
		ck := d.Checkpoint(fp, targetName)
		ck.Meta["settings"] = settings
		ck.Meta["step"] = strconv.Itoa(st.step)
		if !final {
			// The weights so far are a usable draft; the resume file adds
			// what training needs to continue.
			if err := ck.WriteFile(f.out); err != nil {
				return err
			}
			st.save(ck)
			tr.Opt.Save(ck)
			return ck.WriteFile(resumePath)
		}
		ck.Meta["positions"] = strconv.Itoa(st.positions)
		for k, v := range st.evalMeta {
			ck.Meta[k] = v
		}
		if err := ck.WriteFile(f.out); err != nil {
			return err
		}
		if f.install {
			path, err := userDraftPath(lm)
			if err != nil {
				return err
			}
			if err := ck.WriteFile(path); err != nil {
				return err
			}
			fmt.Fprintf(stderr, "installed as %s (run --draft auto uses it)\n", path)
		}
		os.Remove(resumePath)
		return nil
	}

	evalWins, err := data.evalWindows(target, f.seqLen, 8192)
	if err != nil {
		return err
	}
	err = st.train(ctx, f, tr, target, data, total, save, stderr)
	if errors.Is(err, context.Canceled) {
		if err := save(false); err != nil {
			return err
		}
		return fmt.Errorf("interrupted at step %d of %d: saved %s and %s; run the same command to resume", st.step, total, f.out, resumePath)
	}
	if err != nil {
		return err
	}
	if len(evalWins) > 0 {
		m, err := evaluate(tr, evalWins, f.batch)
		if err != nil {
			return err
		}
		st.evalMeta = map[string]string{"eval.loss": fmt.Sprintf("%.4f", m.Loss), "eval.top1": fmt.Sprintf("%.4f", m.Top1[0])}
		fmt.Fprintf(stderr, "held out (%d positions): loss %.4f (SmoothL1 %.4f, CE %.4f), top-1 agreement %s\n",
			m.Positions, m.Loss, m.FeatLoss, m.ProbLoss, fmtTop1(m.Top1))
	}
	if err := save(true); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s\n", f.out)
	return nil
}

func fmtTop1(t []float64) string {
	s := make([]string, len(t))
	for i, v := range t {
		s[i] = fmt.Sprintf("%.1f%%", 100*v)
	}
	if len(s) > 1 {
		return strings.Join(s, " / ") + " (draft steps 1.." + strconv.Itoa(len(s)) + ")"
	}
	return s[0]
}

// evaluate runs the held-out windows in batches and averages by position.
func evaluate(tr *gpu.Trainer, ws []gpu.Window, batch int) (gpu.Metrics, error) {
	var sum gpu.Metrics
	for lo := 0; lo < len(ws); {
		hi, n := lo, 0
		for hi < len(ws) && n+len(ws[hi].Tokens)-1 <= batch {
			n += len(ws[hi].Tokens) - 1
			hi++
		}
		m, err := tr.Eval(ws[lo:hi])
		if err != nil {
			return sum, err
		}
		w := float64(m.Positions)
		sum.Loss += w * m.Loss
		sum.FeatLoss += w * m.FeatLoss
		sum.ProbLoss += w * m.ProbLoss
		if sum.Top1 == nil {
			sum.Top1 = make([]float64, len(m.Top1))
		}
		for i, v := range m.Top1 {
			sum.Top1[i] += w * v
		}
		sum.Positions += m.Positions
		lo = hi
	}
	n := float64(max(1, sum.Positions))
	sum.Loss, sum.FeatLoss, sum.ProbLoss = sum.Loss/n, sum.FeatLoss/n, sum.ProbLoss/n
	for i := range sum.Top1 {
		sum.Top1[i] /= n
	}
	return sum, nil
}

// runState is where training stands: what a resume checkpoint records.
type runState struct {
	step      int // optimizer steps done
	epoch     int
	consumed  int // windows of this epoch already trained on
	positions int // positions trained on in all
	evalMeta  map[string]string
}

func (s *runState) save(ck *draft.Checkpoint) {
	ck.Meta["resume.epoch"] = strconv.Itoa(s.epoch)
	ck.Meta["resume.consumed"] = strconv.Itoa(s.consumed)
	ck.Meta["resume.positions"] = strconv.Itoa(s.positions)
}

func (s *runState) resume(ck *draft.Checkpoint, d *gpu.Draft, fp, name, settings string) error {
	if err := ck.CheckTarget(fp, name); err != nil {
		return fmt.Errorf("resume checkpoint: %w (use --fresh to start over)", err)
	}
	if ck.Meta["settings"] != settings {
		return usageError{fmt.Errorf("a resume checkpoint made with other settings exists (%s); run with those, or --fresh to start over", ck.Meta["settings"])}
	}
	if err := d.Load(ck); err != nil {
		return err
	}
	var err error
	for _, kv := range []struct {
		k string
		v *int
	}{{"step", &s.step}, {"resume.epoch", &s.epoch}, {"resume.consumed", &s.consumed}, {"resume.positions", &s.positions}} {
		if *kv.v, err = strconv.Atoi(ck.Meta[kv.k]); err != nil {
			return fmt.Errorf("resume checkpoint: metadata %s: %v (use --fresh to start over)", kv.k, err)
		}
	}
	return nil
}

// train runs optimizer steps until total, streaming windows with the
// target's features from a producer goroutine. It returns
// context.Canceled when interrupted (at a step boundary).
func (s *runState) train(ctx context.Context, f distillFlags, tr *gpu.Trainer, target *cpu.Target, data *corpusData,
	total int, save func(bool) error, stderr io.Writer) error {
	bar := newProgress(stderr, "train", total)
	bar.done = s.step
	var emaLoss, emaTop1 float64
	var trainTime time.Duration
	trained := 0
	lastSave := time.Now()
	for s.step < total {
		order := data.order(s.epoch, uint64(f.seed))
		wins := make(chan gpu.Window, 32)
		pctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			errc <- data.produce(pctx, target, order, f.seqLen, s.consumed, wins)
			close(wins)
		}()
		var batch []gpu.Window
		n := 0
		step := func() error {
			t0 := time.Now()
			m, err := tr.Step(batch)
			if err != nil {
				return err
			}
			trainTime += time.Since(t0)
			trained += m.Positions
			s.step++
			s.consumed += len(batch)
			s.positions += m.Positions
			if emaLoss == 0 {
				emaLoss, emaTop1 = m.Loss, m.Top1[0]
			}
			emaLoss, emaTop1 = 0.9*emaLoss+0.1*m.Loss, 0.9*emaTop1+0.1*m.Top1[0]
			bar.update(s.step, fmt.Sprintf("loss %.4f  top-1 %.1f%%  %.0f pos/s", emaLoss, 100*emaTop1,
				float64(trained)/max(1e-9, trainTime.Seconds())))
			batch, n = batch[:0], 0
			if f.stopAfter > 0 && s.step >= f.stopAfter && s.step < total {
				return context.Canceled
			}
			if time.Since(lastSave) > f.saveEvery && s.step < total {
				lastSave = time.Now()
				return save(false)
			}
			return nil
		}
		var err error
		for w := range wins {
			T := len(w.Tokens) - 1
			if n+T > f.batch {
				if err = step(); err != nil || s.step >= total {
					break
				}
			}
			if err = ctx.Err(); err != nil {
				break
			}
			batch = append(batch, w)
			n += T
		}
		if err == nil && len(batch) > 0 && s.step < total && ctx.Err() == nil {
			err = step()
		}
		cancel()
		for range wins {
		}
		if perr := <-errc; err == nil && perr != nil && !errors.Is(perr, context.Canceled) {
			err = perr
		}
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			bar.finish()
			return err
		}
		if s.step < total {
			s.epoch, s.consumed = s.epoch+1, 0
		}
	}
	bar.finish()
	fmt.Fprintf(stderr, "trained %d positions in %s: %.0f positions/s in training steps\n",
		trained, trainTime.Round(time.Millisecond), float64(trained)/max(1e-9, trainTime.Seconds()))
	return nil
}

// corpusData is the tokenized corpus: segments of at most the target's
// context, each one target pass. Features are computed per segment as
// training reaches it, never for the whole corpus at once.
type corpusData struct {
	segs                          [][]int
	train, eval                   []int // segment indices
	trainPositions, evalPositions int
	seqLen                        int
}

// windowsOf splits a segment of n tokens into training windows of seqLen
// positions (seqLen+1 tokens, consecutive windows sharing one token);
// windows of fewer than 2 positions are dropped.
func windowsOf(n, seqLen int) [][2]int {
	var w [][2]int
	for lo := 0; lo+2 < n; lo += seqLen {
		w = append(w, [2]int{lo, min(lo+seqLen+1, n)})
	}
	return w
}

func prepareData(docs []string, lm *loaded, ctxLen, seqLen int, evalFrac float64) *corpusData {
	d := &corpusData{seqLen: seqLen}
	for _, doc := range docs {
		toks := lm.Tok.Encode(doc, true, false)
		for lo := 0; lo < len(toks); lo += ctxLen {
			if seg := toks[lo:min(lo+ctxLen, len(toks))]; len(seg) >= 3 {
				d.segs = append(d.segs, seg)
			}
		}
	}
	every := 0
	if evalFrac > 0 && len(d.segs) >= 2 {
		every = max(2, int(math.Round(1/evalFrac)))
	}
	for i, seg := range d.segs {
		pos := 0
		for _, w := range windowsOf(len(seg), seqLen) {
			pos += w[1] - w[0] - 1
		}
		if every > 0 && i%every == every-1 {
			d.eval = append(d.eval, i)
			d.evalPositions += pos
		} else {
			d.train = append(d.train, i)
			d.trainPositions += pos
		}
	}
	return d
}

// order is the training segments in epoch's shuffled order.
func (d *corpusData) order(epoch int, seed uint64) []int {
	o := slices.Clone(d.train)
	rng := rand.New(rand.NewPCG(seed, uint64(epoch)+1))
	rng.Shuffle(len(o), func(i, j int) { o[i], o[j] = o[j], o[i] })
	return o
}

// stepsFor counts the optimizer steps of epochs passes, packing windows
// into batches as training does.
func (d *corpusData) stepsFor(epochs float64, batch, seqLen int, seed uint64) int {
	steps := 0
	full := int(epochs)
	for e := 0; e <= full; e++ {
		share := 1.0
		if e == full {
			share = epochs - float64(full)
			if share <= 0 {
				break
			}
		}
		n, inEpoch := 0, 0
		var counts []int
		for _, si := range d.order(e, seed) {
			for _, w := range windowsOf(len(d.segs[si]), seqLen) {
				T := w[1] - w[0] - 1
				if n+T > batch {
					counts = append(counts, n)
					n = 0
				}
				n += T
			}
		}
		if n > 0 {
			counts = append(counts, n)
		}
		inEpoch = int(math.Ceil(share * float64(len(counts))))
		steps += inEpoch
	}
	return max(1, steps)
}

// produce sends the windows of segments in order, with the target's
// features, skipping the first skip windows.
func (d *corpusData) produce(ctx context.Context, target *cpu.Target, order []int, seqLen, skip int, out chan<- gpu.Window) error {
	for _, si := range order {
		seg := d.segs[si]
		ws := windowsOf(len(seg), seqLen)
		if skip >= len(ws) {
			skip -= len(ws)
			continue
		}
		feats, err := segmentFeatures(target, seg)
		if err != nil {
			return err
		}
		for _, w := range ws[skip:] {
			win := gpu.Window{Tokens: seg[w[0]:w[1]], Features: feats[w[0]:w[1]]}
			select {
			case out <- win:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		skip = 0
	}
	return nil
}

// segmentFeatures runs the target over a segment from an empty context
// and copies out every position's final hidden state.
func segmentFeatures(target *cpu.Target, seg []int) ([][]float32, error) {
	if err := target.Truncate(0); err != nil {
		return nil, err
	}
	_, hid, err := target.ForwardFeatures(seg)
	if err != nil {
		return nil, fmt.Errorf("target forward: %w", err)
	}
	feats := make([][]float32, len(hid))
	for i, h := range hid {
		feats[i] = slices.Clone(h)
	}
	return feats, nil
}

// evalWindows computes the held-out windows with features, up to about
// limit positions.
func (d *corpusData) evalWindows(target *cpu.Target, seqLen, limit int) ([]gpu.Window, error) {
	var out []gpu.Window
	n := 0
	for _, si := range d.eval {
		if n >= limit {
			break
		}
		seg := d.segs[si]
		feats, err := segmentFeatures(target, seg)
		if err != nil {
			return nil, err
		}
		for _, w := range windowsOf(len(seg), seqLen) {
			out = append(out, gpu.Window{Tokens: seg[w[0]:w[1]], Features: feats[w[0]:w[1]]})
			n += w[1] - w[0] - 1
		}
	}
	return out, nil
}

// docSeparator separates documents in a corpus file (TinyStories' own).
const docSeparator = "<|endoftext|>"

// readCorpus reads a text file, or every regular file under a directory
// (in name order, hidden ones skipped), as documents.
func readCorpus(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	var files []string
	if st.IsDir() {
		err := filepath.WalkDir(path, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if strings.HasPrefix(e.Name(), ".") && p != path {
				if e.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if e.Type().IsRegular() {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("corpus: %w", err)
		}
		sort.Strings(files)
	} else {
		files = []string{path}
	}
	var docs []string
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("corpus: %w", err)
		}
		docs = append(docs, splitDocs(string(b))...)
	}
	return docs, nil
}

func splitDocs(text string) []string {
	var docs []string
	for _, d := range strings.Split(text, docSeparator) {
		if d = strings.TrimSpace(d); d != "" {
			docs = append(docs, d)
		}
	}
	return docs
}

// selfPrompts open the samples --self generates: story and dialogue
// openings, and nothing at all (BOS only).
var selfPrompts = []string{"", "Once upon a time", "One day", "Lily", "Tom and", "The little", "There was a",
	"Ben wanted", "It was a sunny day", "The cat", "The dog", "Mom said", "Timmy", "In a small town", "A bird",
	"Max and his", "Anna had a", "The big", "Sue found", "Jack", "Emma loved", "At the park", "The old man",
	"A girl named", "A boy named", "Every morning", "The king", "Once there was", "Sam and Mia", "The sun"}

// selfCorpus generates the --self samples, or reads them back from
// OUT.self.txt, where they are appended as they are made (so an
// interrupted run keeps them). Sample i is determined by i and the seed.
func selfCorpus(ctx context.Context, f distillFlags, lm *loaded, target *cpu.Target, stderr io.Writer) ([]string, error) {
	path := f.out + ".self.txt"
	var docs []string
	if b, err := os.ReadFile(path); err == nil {
		docs = splitDocs(string(b))
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if len(docs) >= f.self {
		fmt.Fprintf(stderr, "using %d samples from %s\n", f.self, path)
		return docs[:f.self], nil
	}
	file, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	bar := newProgress(stderr, "self", f.self)
	tokens := 0
	start := time.Now()
	for i := len(docs); i < f.self; i++ {
		p := selfPrompts[i%len(selfPrompts)]
		// The first round of prompts decodes greedily; the rest sample at
		// temperatures spread evenly (golden-ratio steps) over [0, selfTemp].
		temp := float32(0)
		if i >= len(selfPrompts) {
			temp = f.selfTemp * float32(math.Mod(float64(i)*0.6180339887, 1))
		}
		prompt := lm.Tok.Encode(p, true, false)
		if len(prompt) == 0 {
			prompt = []int{lm.Tok.BOS()}
		}
		var out []int
		req := engine.Request{Prompt: prompt, MaxTokens: min(f.selfLen, target.Context()-len(prompt)-1),
			Sampler: engine.SamplerParams{Temperature: temp, TopK: 40, TopP: 0.95, Seed: uint64(f.seed)*1_000_003 + uint64(i)},
			Stop:    lm.Tok.IsEOG}
		if _, err := engine.Generate(ctx, target, req, func(tok int) error { out = append(out, tok); return nil }); err != nil {
			bar.finish()
			if errors.Is(err, context.Canceled) {
				return nil, fmt.Errorf("interrupted after %d samples, kept in %s; run the same command to go on", i, path)
			}
			return nil, err
		}
		// Decoded together, so that the prompt and the continuation join
		// as the tokenizer would write them.
		body := slices.Clone(prompt)
		if len(body) > 0 && body[0] == lm.Tok.BOS() {
			body = body[1:]
		}
		text := strings.TrimSpace(lm.Tok.Decode(append(body, out...)))
		if strings.Contains(text, docSeparator) || text == "" {
			text = strings.ReplaceAll(text, docSeparator, "") + "."
		}
		if _, err := file.WriteString(text + "\n" + docSeparator + "\n"); err != nil {
			return nil, err
		}
		docs = append(docs, text)
		tokens += len(out)
		bar.update(i+1, fmt.Sprintf("%.0f tokens/s", float64(tokens)/time.Since(start).Seconds()))
	}
	bar.finish()
	return docs, nil
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
