// Package distill trains a Dovetail (DGF) draft for a target offline: from
// a corpus or the target's own samples, streaming the target's features
// window by window, with a resume checkpoint when interrupted.
package distill

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"

	"dovetail/app/runner"
	"dovetail/app/runner/store"
	"dovetail/cpu"
	"dovetail/dgf"
	"dovetail/models/draft"
	"dovetail/train"
)

// Options say what to distill and how.
type Options struct {
	Corpus   string              // a text file or a directory of them; documents separated by <|endoftext|>
	Self     int                 // first generate this many samples from the target and train on them
	SelfLen  int                 // most tokens per sample
	SelfTemp float32             // samples' temperatures spread over [0, SelfTemp]
	Out      string              // the draft checkpoint to write
	Device   runner.DeviceChoice // where the draft trains
	Blocks   int                 // decoder blocks after the DGF
	FFN      int                 // their MLP width (0: the target's)
	Steps    int                 // optimizer steps (0: Epochs)
	Epochs   float64
	LR       float32
	Warmup   int
	SeqLen   int // positions per training window
	Batch    int // positions per optimizer step
	Unroll   int // training-time-test steps
	Noise    float32
	CEWeight float32
	// FeatWeight weighs SmoothL1 on the predicted features.
	FeatWeight float32
	EvalFrac   float64 // share of the corpus held out
	Seed       int64
	Threads    int
	Fresh      bool // start over: no resume checkpoint, new --self samples
	Install    bool // also install the draft where --draft auto finds it
	Force      bool // overwrite an existing Out
	SaveEvery  time.Duration
	StopAfter  int // behave as if interrupted after this many steps (tests)
	// Store is where Install puts the draft (nil: the user's).
	Store *store.Store
}

// Defaults are `dovetail distill`'s defaults.
func Defaults() Options {
	return Options{SelfLen: 256, SelfTemp: 1, Blocks: 1, Epochs: 1, LR: 1e-3, Warmup: 50, SeqLen: 256,
		Batch: 2048, Unroll: 1, CEWeight: 0.1, FeatWeight: 1, EvalFrac: 0.05, Seed: 1, Threads: 1, SaveEvery: time.Minute}
}

// Validate names the first option out of range.
func (o Options) Validate() error {
	switch {
	case o.Out == "":
		return fmt.Errorf("an output file is required (-o DRAFT.gguf)")
	case o.Corpus == "" && o.Self <= 0:
		return fmt.Errorf("no training text: give --corpus FILE|DIR or --self N")
	case o.Self < 0 || o.Self > 1<<20 || o.SelfLen < 2 || o.SelfLen > 1<<16 || !(o.SelfTemp >= 0) || o.SelfTemp > 2:
		return fmt.Errorf("--self %d, --self-len %d or --self-temp %g out of range", o.Self, o.SelfLen, o.SelfTemp)
	case o.Blocks < 1 || o.Blocks > draft.MaxBlocks:
		return fmt.Errorf("--blocks %d out of range [1, %d]", o.Blocks, draft.MaxBlocks)
	case o.FFN < 0 || o.Steps < 0 || !(o.Epochs > 0) || o.Warmup < 0:
		return fmt.Errorf("--ffn, --steps, --epochs and --warmup must not be negative (and --epochs positive)")
	case !(o.LR > 0) || o.LR > 1:
		return fmt.Errorf("--lr %g out of range (0, 1]", o.LR)
	case o.SeqLen < 2 || o.Batch < o.SeqLen:
		return fmt.Errorf("--seq-len %d must be at least 2 and --batch %d at least --seq-len", o.SeqLen, o.Batch)
	case o.Unroll < 1 || o.Unroll > 16:
		return fmt.Errorf("--unroll %d out of range [1, 16]", o.Unroll)
	case o.Noise < 0 || o.CEWeight < 0 || o.FeatWeight < 0 || o.EvalFrac < 0 || o.EvalFrac >= 0.5:
		return fmt.Errorf("--noise, --ce-weight and --feature-weight must not be negative, --eval must be in [0, 0.5)")
	case o.Threads < 1 || o.Threads > 1024:
		return fmt.Errorf("--threads %d out of range [1, 1024]", o.Threads)
	}
	return nil
}

// settings are the options that shape training: a resume checkpoint made
// with others cannot continue this run.
func (o Options) settings(total int) string {
	return fmt.Sprintf("corpus=%q self=%d self-len=%d self-temp=%g blocks=%d ffn=%d seq-len=%d batch=%d lr=%g warmup=%d unroll=%d noise=%g ce=%g feat=%g eval=%g seed=%d steps=%d",
		o.Corpus, o.Self, o.SelfLen, o.SelfTemp, o.Blocks, o.FFN, o.SeqLen, o.Batch, o.LR, o.Warmup, o.Unroll, o.Noise, o.CEWeight, o.FeatWeight, o.EvalFrac, o.Seed, total)
}

// Progress is where a phase stands: "self" (generating samples) or
// "train" (optimizer steps). Info says how it goes (loss, speed);
// Finished marks the phase's last report.
type Progress struct {
	Phase       string
	Done, Total int
	Info        string
	Finished    bool
}

// Result is what Run made.
type Result struct {
	Path      string // the draft written
	Installed string // where it was installed ("" without Install)
	Replaced  bool   // the install kept an earlier draft restorable
	Eval      *train.Metrics
}

// ErrUsage marks errors in how Run was asked (a resume checkpoint made
// with other settings).
var ErrUsage = errors.New("usage")

// Interrupted says Run stopped early and saved where it was.
type Interrupted struct {
	Step, Total  int
	Out, Resume  string
	SamplesKept  string // interrupted while generating samples: where they are
	SamplesSoFar int
}

func (e *Interrupted) Error() string {
	if e.SamplesKept != "" {
		return fmt.Sprintf("interrupted after %d samples, kept in %s; run the same command to go on", e.SamplesSoFar, e.SamplesKept)
	}
	return fmt.Sprintf("interrupted at step %d of %d: saved %s and %s; run the same command to resume", e.Step, e.Total, e.Out, e.Resume)
}

// run is one distillation.
type run struct {
	o        Options
	m        *runner.Model
	target   *cpu.Target
	progress func(Progress)
	notify   func(runner.Notice)
	total    int // optimizer steps in all
}

func (r *run) info(format string, args ...any) {
	r.notify(runner.Notice{Text: fmt.Sprintf(format, args...)})
}

// Run distills a draft for m as o says, reporting progress and notices as
// it goes. Cancelling ctx saves a resume checkpoint (an *Interrupted
// error); the same options then continue from it.
func Run(ctx context.Context, m *runner.Model, o Options, progress func(Progress), notify func(runner.Notice)) (Result, error) {
	if err := o.Validate(); err != nil {
		return Result{}, fmt.Errorf("%w: %v", ErrUsage, err)
	}
	if progress == nil {
		progress = func(Progress) {}
	}
	if notify == nil {
		notify = func(runner.Notice) {}
	}
	resumePath := o.Out + ".resume"
	resuming := false
	if !o.Fresh {
		_, err := os.Stat(resumePath)
		resuming = err == nil
	}
	if _, err := os.Stat(o.Out); err == nil && !o.Force && !resuming {
		return Result{}, fmt.Errorf("%w: %s exists: choose another -o, or --force to overwrite it", ErrUsage, o.Out)
	}
	pool := cpu.NewPool(o.Threads)
	defer pool.Close()
	r := &run{o: o, m: m, target: cpu.NewTarget(m.Llama, pool, 0), progress: progress, notify: notify}
	return r.distill(ctx)
}

func (r *run) distill(ctx context.Context) (Result, error) {
	o, m := r.o, r.m
	docs, data, err := r.corpus(ctx)
	if err != nil {
		return Result{}, err
	}
	r.total = o.Steps
	if r.total == 0 {
		r.total = data.stepsFor(o.Epochs, o.Batch, o.SeqLen, uint64(o.Seed))
	}
	cfg := draft.ForTarget(m.Config(), o.Blocks, o.FFN)
	dev, err := runner.TrainDevice(o.Device, cfg, o.Threads, r.notify)
	if err != nil {
		return Result{}, err
	}
	defer dev.Close()
	d, err := dgf.NewDraft(dev, cfg, m.Llama)
	if err != nil {
		return Result{}, err
	}
	defer d.Free()
	tr, st, err := r.trainer(d)
	if err != nil {
		return Result{}, err
	}
	defer tr.Free()
	r.info("distilling a DGF draft of %d block(s), %.2fM parameters, for %s on %s",
		cfg.Blocks, float64(cfg.Params())/1e6, m.Name, dev.Name())
	r.info("corpus: %d documents, %d training positions, %d held out; %d steps of up to %d positions",
		len(docs), data.trainPositions, data.evalPositions, r.total, o.Batch)
	return r.trainAndSave(ctx, d, tr, st, data)
}

// corpus is the text to train on: the target's own samples first
// (--self), then the corpus's documents, split for training and held out.
func (r *run) corpus(ctx context.Context) ([]string, *corpusData, error) {
	o := r.o
	var docs []string
	if o.Self > 0 {
		var err error
		if docs, err = r.selfCorpus(ctx); err != nil {
			return nil, nil, err
		}
	}
	if o.Corpus != "" {
		more, err := readCorpus(o.Corpus)
		if err != nil {
			return nil, nil, err
		}
		docs = append(docs, more...)
	}
	data := prepareData(docs, r.m.Tok, r.target.Context(), o.SeqLen, o.EvalFrac)
	if data.trainPositions == 0 {
		return nil, nil, fmt.Errorf("the corpus holds no text to train on (%d documents)", len(docs))
	}
	return docs, data, nil
}

// trainer prepares d's training: from the resume checkpoint beside the
// output when there is one (and not --fresh), else from a new draft.
func (r *run) trainer(d *dgf.Draft) (*train.Trainer, *runState, error) {
	o, m := r.o, r.m
	tc := train.DefaultTrainConfig()
	tc.LR, tc.Warmup, tc.TotalSteps, tc.Unroll, tc.Noise, tc.Seed = o.LR, o.Warmup, r.total, o.Unroll, o.Noise, uint64(o.Seed)
	tc.ProbWeight, tc.FeatureWeight = o.CEWeight, o.FeatWeight
	st := &runState{}
	resumePath := o.Out + ".resume"
	var resumeCk *draft.Checkpoint
	if !o.Fresh {
		ck, err := draft.Load(resumePath)
		switch {
		case err == nil:
			if err := st.resume(ck, d, m.Fingerprint, m.Name, o.settings(r.total)); err != nil {
				return nil, nil, err
			}
			tc.Seed += uint64(st.step) // fresh noise after the resume point
			resumeCk = ck
		case !errors.Is(err, fs.ErrNotExist):
			return nil, nil, fmt.Errorf("%w (use --fresh to start over)", err)
		}
	}
	if resumeCk == nil {
		d.Init(uint64(o.Seed))
	}
	tr, err := train.NewTrainer(d, tc, o.Batch, o.SeqLen)
	if err != nil {
		return nil, nil, err
	}
	if resumeCk != nil {
		if err := tr.Opt.Load(resumeCk); err != nil {
			tr.Free()
			return nil, nil, fmt.Errorf("%s: %w (use --fresh to start over)", resumePath, err)
		}
		r.info("resuming from %s at step %d of %d", resumePath, st.step, r.total)
	}
	return tr, st, nil
}

// trainAndSave trains to the last step, saving as it goes, scores the
// draft on the held-out text and saves it; a cancelled run saves where it
// got to and returns *Interrupted.
func (r *run) trainAndSave(ctx context.Context, d *dgf.Draft, tr *train.Trainer, st *runState, data *corpusData) (Result, error) {
	o := r.o
	res := Result{Path: o.Out}
	save := func(final bool) error { return r.save(d, tr, st, final, &res) }
	evalWins, err := data.evalWindows(r.target, o.SeqLen, 8192)
	if err != nil {
		return Result{}, err
	}
	err = st.train(ctx, r, tr, data, r.total, save)
	if errors.Is(err, context.Canceled) {
		if err := save(false); err != nil {
			return Result{}, err
		}
		return Result{}, &Interrupted{Step: st.step, Total: r.total, Out: o.Out, Resume: o.Out + ".resume"}
	}
	if err != nil {
		return Result{}, err
	}
	if len(evalWins) > 0 {
		m, err := evaluate(tr, evalWins, o.Batch)
		if err != nil {
			return Result{}, err
		}
		res.Eval = &m
		st.evalMeta = map[string]string{"eval.loss": fmt.Sprintf("%.4f", m.Loss), "eval.top1": fmt.Sprintf("%.4f", m.Top1[0])}
		r.info("held out (%d positions): loss %.4f (SmoothL1 %.4f, CE %.4f), top-1 agreement %s",
			m.Positions, m.Loss, m.FeatLoss, m.ProbLoss, fmtTop1(m.Top1))
	}
	if err := save(true); err != nil {
		return Result{}, err
	}
	return res, nil
}

// save writes the draft so far; until the final save, with what training
// needs to continue in the resume checkpoint beside it.
func (r *run) save(d *dgf.Draft, tr *train.Trainer, st *runState, final bool, res *Result) error {
	o, m := r.o, r.m
	ck := d.Checkpoint(m.Fingerprint, m.Name)
	ck.Meta["settings"] = o.settings(r.total)
	ck.Meta["step"] = strconv.Itoa(st.step)
	resumePath := o.Out + ".resume"
	if !final {
		// The weights so far are a usable draft; the resume file adds
		// what training needs to continue.
		if err := ck.WriteFile(o.Out); err != nil {
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
	if err := ck.WriteFile(o.Out); err != nil {
		return err
	}
	if o.Install {
		s := o.Store
		if s == nil {
			var err error
			if s, err = store.Open(); err != nil {
				return err
			}
		}
		path, replaced, err := s.Install(ck)
		if err != nil {
			return err
		}
		res.Installed, res.Replaced = path, replaced
	}
	os.Remove(resumePath)
	return nil
}
