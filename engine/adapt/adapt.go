package adapt

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"dovetail/engine/drafters"
	"dovetail/engine/tree"

	"dovetail/internal/osthread"
	"dovetail/models/draft"
)

// Mode says how a draft adapts to the text it drafts for.
type Mode int

const (
	// Off keeps the draft as it is.
	Off Mode = iota
	// Background trains a shadow copy of the draft on a goroutine
	// from what verification computed, and swaps it in between rounds
	// when it beats the live one on held-out recent records.
	Background
	// PerRequest (Test-Time Speculation) takes one gradient step per
	// verified round on the request's own text, held to the draft the
	// request started with, and goes back to that draft afterwards.
	PerRequest
)

var adaptModes = []string{"off", "background", "per-request"}

func (m Mode) String() string {
	if int(m) < len(adaptModes) {
		return adaptModes[m]
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode reads off, background or per-request.
func ParseMode(s string) (Mode, error) {
	for i, n := range adaptModes {
		if s == n {
			return Mode(i), nil
		}
	}
	return 0, fmt.Errorf("adaptation mode %q: want off, background or per-request", s)
}

// Learner is the device side of adaptation (train.Learner): a shadow copy
// of the live draft that trains, scored against the version it last kept.
// Only the adapter's goroutine calls it.
type Learner interface {
	// Train takes one optimizer step of the shadow on ws.
	Train(ws []Window) (draft.Score, error)
	// Compare scores the shadow and the kept version on held-out ws.
	Compare(ws []Window) (shadow, kept draft.Score, err error)
	// Publish makes the shadow the live draft's newest version; keep
	// makes it the kept version too (else it is a per-request trial).
	Publish(keep bool) (version int, err error)
	// Restore sets the shadow, and the live draft, back to the kept
	// version.
	Restore() error
	// Version is the kept version's number.
	Version() int
}

// AdaptConfig are the adaptation loop's settings.
type Config struct {
	Mode        Mode
	RecordBytes int     // bound of the record ring
	Window      int     // positions per training window
	Batch       int     // windows per optimizer step
	Steps       int     // optimizer steps per training run
	HeldOut     int     // held-out windows (the newest records) per evaluation
	MinGain     float64 // simulated τ the shadow must gain over the kept version
	// Duty is the share of wall time the trainer computes while a request
	// is decoding: after a step of s seconds it sleeps s·(1−Duty)/Duty.
	// 1 never waits (a GPU, or a spare core); on a host whose cores all
	// decode, less keeps decoding fast.
	Duty float64
	// IdleThread runs the trainer on an OS thread of idle priority (Linux
	// SCHED_IDLE), where it computes only on cores the decoder leaves
	// idle: for a trainer on the CPU (with one thread: a host device's
	// extra workers run at normal priority). Decoding then keeps its
	// speed, and the trainer learns only in the decoder's gaps
	// (docs/measurements, "A trainer on the CPU at idle priority").
	IdleThread bool
	// RequestWindow is the most positions of its own text a per-request
	// step trains on.
	RequestWindow int
	// Branches is the share of each step's windows that end in a node
	// the target rejected (Aurora; 0: rejected nodes are not kept), and
	// BranchBytes bounds the rejected nodes kept.
	Branches    float64
	BranchBytes int
	// MemoryTokens bounds the text memory (TextMemory): the verified text
	// of finished requests, whose continuations are grafted onto every
	// draft tree. 0: none.
	MemoryTokens int
	Control      Control
	Seed         uint64
}

// DefaultAdaptConfig are the settings chosen with `dovetail bench adapt`
// on both test models (docs/measurements, "Online adaptation" and "The
// defaults of adaptation"): short windows and short training runs
// publishing on a small simulated τ gain over requests held out whole
// (windows of the requests trained on let overfit drafts in); duty 1 (a
// lower duty saved nothing of decode speed); rejected branches off (their
// gain stayed inside the noise); and a text memory of 256K tokens, which
// does most of adaptation's work where text recurs.
func DefaultConfig() Config {
	return Config{Mode: Background, RecordBytes: 16 << 20, Window: 32, Batch: 8, Steps: 24, HeldOut: 8,
		MinGain: 0.02, Duty: 1, RequestWindow: 64, BranchBytes: 16 << 20, MemoryTokens: 1 << 18,
		Control: *DefaultControl(), Seed: 1}
}

// HostBytes is what adaptation by c holds in host memory besides the
// draft: the record ring, the rejected branches and the text memory.
func (c Config) HostBytes() uint64 {
	b := uint64(max(c.RecordBytes, 0)) + TextMemoryBytes(c.MemoryTokens)
	if c.Branches > 0 {
		b += uint64(max(c.BranchBytes, 0))
	}
	return b
}

// AdaptStats is what the adapter has done so far.
type Stats struct {
	Mode              string
	Version           int // the kept version
	Collecting        bool
	Training          bool // a training run is under way
	Paused            bool // SetPaused: records are kept, nothing trains
	Records           int  // positions held
	Branches          int  // rejected nodes held
	Remembered        int  // tokens in the text memory
	Runs, Published   int
	ShortTau, LongTau float64     // EMAs of measured τ
	Shadow, Kept      draft.Score // the last comparison's
	TauHistory        []float64   // measured τ (short EMA) at each publication
}

// Adapter runs online adaptation of one live draft: the drafters it hands
// out (one per concurrent sequence) record what the target verified and
// measure τ; a goroutine trains the learner's shadow and publishes it.
type Adapter struct {
	cfg Config
	l   Learner
	rec *Records
	mem *TextMemory // nil: none

	mu        sync.Mutex
	ctl       Control
	seq       uint64
	gap       bool // collection paused since the last record: a new sequence starts
	fresh     int  // positions recorded since the last training run
	busy      int  // sequences decoding
	st        Stats
	err       error
	started   bool
	paused    bool
	rng       *rand.Rand
	wake      chan struct{}
	stop      chan struct{}
	done      chan struct{}
	onPublish func(version int)
}

// NewAdapter adapts through l a draft reading features of size hidden.
// onPublish, if set, is called on the trainer's goroutine after each kept
// publication (persistence saves there).
func NewAdapter(l Learner, hidden int, cfg Config, onPublish func(version int)) (*Adapter, error) {
	if cfg.Window < 3 || cfg.Batch < 1 || cfg.Steps < 1 || cfg.HeldOut < 1 || cfg.RequestWindow < 3 {
		return nil, fmt.Errorf("adaptation: windows of %d positions, %d per step, %d steps, %d held out, %d per request: too few",
			cfg.Window, cfg.Batch, cfg.Steps, cfg.HeldOut, cfg.RequestWindow)
	}
	if cfg.Duty <= 0 || cfg.Duty > 1 {
		return nil, fmt.Errorf("adaptation: duty %g outside (0, 1]", cfg.Duty)
	}
	if cfg.Branches < 0 || cfg.Branches > 1 {
		return nil, fmt.Errorf("adaptation: a share of %g of windows from rejected branches, outside [0, 1]", cfg.Branches)
	}
	if cfg.MemoryTokens < 0 {
		return nil, fmt.Errorf("adaptation: a text memory of %d tokens", cfg.MemoryTokens)
	}
	rec, err := NewRecords(hidden, cfg.RecordBytes)
	if err != nil {
		return nil, err
	}
	if cfg.Branches > 0 {
		if err := rec.KeepBranches(cfg.BranchBytes); err != nil {
			return nil, fmt.Errorf("adaptation: %d bytes for rejected branches: %w", cfg.BranchBytes, err)
		}
	}
	a := &Adapter{cfg: cfg, l: l, rec: rec, ctl: cfg.Control, rng: rand.New(rand.NewPCG(cfg.Seed, 11)),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), onPublish: onPublish}
	if cfg.MemoryTokens > 0 {
		a.mem = NewTextMemory(cfg.MemoryTokens)
	}
	a.st.Mode = cfg.Mode.String()
	a.st.Version = l.Version()
	return a, nil
}

// Start runs the trainer goroutine (background mode; the other modes need
// none).
func (a *Adapter) Start() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started || a.cfg.Mode != Background {
		return
	}
	a.started = true
	go a.train()
}

// Close stops the trainer, waiting for its step to end, puts a per-request
// trial back, and returns the first error adaptation met.
func (a *Adapter) Close() error {
	a.mu.Lock()
	started := a.started
	a.started = false
	a.mu.Unlock()
	if started {
		close(a.stop)
		<-a.done
	}
	if a.cfg.Mode == PerRequest {
		if err := a.l.Restore(); err != nil {
			a.fail(err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Stats returns a copy of what the adapter has done.
func (a *Adapter) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.st
	s.Collecting = a.ctl.Collecting()
	s.ShortTau, s.LongTau = a.ctl.EMAs()
	s.Records = a.rec.Len()
	s.Branches = a.rec.Branches()
	if a.mem != nil {
		s.Remembered = a.mem.Len()
	}
	s.TauHistory = append([]float64(nil), a.st.TauHistory...)
	return s
}

// SetPaused pauses training (records are still kept; a run under way
// finishes) or resumes it.
func (a *Adapter) SetPaused(p bool) {
	a.mu.Lock()
	a.paused = p
	a.st.Paused = p
	a.mu.Unlock()
	if !p {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
}

// SetTauHistory starts the τ history (from a saved draft).
func (a *Adapter) SetTauHistory(h []float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.st.TauHistory = append([]float64(nil), h...)
}

// Records is the record ring.
func (a *Adapter) Records() *Records { return a.rec }

// Memory is the text memory, nil if there is none.
func (a *Adapter) Memory() *TextMemory { return a.mem }

func (a *Adapter) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		a.err = err
	}
}

// Drafter wraps d, a drafter of the adapter's live draft, so that its
// sequence feeds adaptation.
func (a *Adapter) Drafter(d *drafters.DGF) *Drafter {
	return &Drafter{DGF: d, a: a}
}

// begin starts a sequence and returns its number.
func (a *Adapter) begin() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	a.busy++
	return a.seq
}

// end marks a sequence as no longer decoding.
func (a *Adapter) end() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.busy = max(0, a.busy-1)
}

// record appends committed positions of sequence seq while collecting,
// and wakes the trainer when a run's worth has arrived. It returns the
// number Records gave the first position, and whether it recorded them.
func (a *Adapter) record(seq *uint64, tokens []int, features [][]float32) (uint64, bool) {
	if a.cfg.Mode != Background || len(tokens) == 0 {
		return 0, false
	}
	a.mu.Lock()
	if !a.ctl.Collecting() {
		a.gap = true
		a.mu.Unlock()
		return 0, false
	}
	if a.gap {
		// Positions after a pause do not follow the ones before it.
		a.seq++
		*seq, a.gap = a.seq, false
	}
	a.fresh += len(tokens)
	ready := a.ctl.ShouldTrain(a.fresh)
	a.mu.Unlock()
	first := a.rec.Append(*seq, tokens, features)
	if ready {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
	return first, true
}

// observe adds a drafted round's τ to the control.
func (a *Adapter) observe(tau float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.ctl.Observe(tau)
}

// train is the trainer goroutine: a training run whenever enough records
// have arrived, until Close.
func (a *Adapter) train() {
	defer close(a.done)
	if a.cfg.IdleThread {
		// Never unlocked: the thread, idle-scheduled, ends with the trainer.
		runtime.LockOSThread()
		osthread.Idle() // elsewhere than Linux, a thread like the others
	}
	for {
		select {
		case <-a.stop:
			return
		case <-a.wake:
		}
		for {
			a.mu.Lock()
			ready := !a.paused && a.ctl.ShouldTrain(a.fresh)
			if ready {
				a.fresh = 0
			}
			a.st.Training = ready
			a.mu.Unlock()
			if !ready {
				break
			}
			err := a.run()
			a.mu.Lock()
			a.st.Training = false
			a.mu.Unlock()
			if err != nil {
				if !errors.Is(err, errStopped) {
					a.fail(fmt.Errorf("adaptation: %w", err))
				}
				return
			}
		}
	}
}

var errStopped = errors.New("stopped")

// run is one training run: Steps optimizer steps on windows of all but the
// newest records, then a comparison on the newest, and a publication if
// the shadow wins.
func (a *Adapter) run() error {
	cfg := a.cfg
	n := a.rec.Len()
	split := a.rec.HoldOut(cfg.HeldOut * cfg.Window)
	if split < cfg.Window || n-split < cfg.Window {
		return nil
	}
	heldOut := a.rec.SampleSpan(a.rng, cfg.HeldOut, cfg.Window, split, n)
	// Half of each batch from the newest quarter of the training records:
	// the text has just drifted there, and the older records keep what
	// the draft knew.
	recent := max(split-max(split/4, cfg.Batch*cfg.Window), 0)
	branches := 0
	if a.rec.Branches() > 0 {
		branches = int(math.Round(float64(cfg.Batch) * cfg.Branches))
	}
	for range cfg.Steps {
		text := cfg.Batch - branches
		ws := a.rec.SampleSpan(a.rng, text/2, cfg.Window, recent, split)
		ws = append(ws, a.rec.SampleSpan(a.rng, text-len(ws), cfg.Window, 0, split)...)
		if branches > 0 {
			bs := a.rec.SampleBranches(a.rng, branches/2, cfg.Window, recent, split)
			ws = append(ws, bs...)
			ws = append(ws, a.rec.SampleBranches(a.rng, branches-len(bs), cfg.Window, 0, split)...)
		}
		if len(ws) == 0 {
			return nil
		}
		t0 := time.Now()
		if _, err := a.l.Train(ws); err != nil {
			return err
		}
		if err := a.pace(time.Since(t0)); err != nil {
			return err
		}
	}
	a.mu.Lock()
	a.st.Runs++
	a.mu.Unlock()
	if len(heldOut) == 0 {
		return nil
	}
	shadow, kept, err := a.l.Compare(heldOut)
	if err != nil {
		return err
	}
	better := shadow.Tau-kept.Tau > cfg.MinGain
	v := 0
	if better {
		if v, err = a.l.Publish(true); err != nil {
			return err
		}
	}
	a.mu.Lock()
	a.st.Shadow, a.st.Kept = shadow, kept
	a.ctl.Evaluated(better)
	if better {
		a.st.Published++
		a.st.Version = v
		short, _ := a.ctl.EMAs()
		a.st.TauHistory = append(a.st.TauHistory, short)
		if k := len(a.st.TauHistory) - maxTauHistory; k > 0 {
			a.st.TauHistory = a.st.TauHistory[k:]
		}
	}
	a.mu.Unlock()
	if better && a.onPublish != nil {
		a.onPublish(v)
	}
	return nil
}

// maxTauHistory bounds the τ history a saved draft carries.
const maxTauHistory = 64

// pace sleeps after a step of d while sequences decode, so that the
// trainer computes at most Duty of the time; it returns errStopped when
// the adapter closes.
func (a *Adapter) pace(d time.Duration) error {
	a.mu.Lock()
	busy := a.busy > 0
	a.mu.Unlock()
	wait := time.Duration(0)
	if busy && a.cfg.Duty < 1 {
		wait = time.Duration(float64(d) * (1 - a.cfg.Duty) / a.cfg.Duty)
	}
	select {
	case <-a.stop:
		return errStopped
	case <-time.After(wait):
		return nil
	}
}

// AdaptiveDrafter is a DGFDrafter whose sequence feeds an Adapter: it
// records the positions the target committed with their features, and
// reports the τ of every drafted round. In per-request mode it also takes
// a gradient step on the request's own text after every round.
type Drafter struct {
	*drafters.DGF
	a       *Adapter
	seq     uint64
	active  bool
	drafted bool
	// Per-request mode: the request's committed positions.
	toks  []int
	feats [][]float32
	// The number of the round's first committed position in the records,
	// if they were recorded: where its rejected nodes hang.
	first    uint64
	recorded bool
	// The text memory: this sequence's text so far, and its own index.
	text []int
	own  *TextMemory
}

// Prefilled starts a sequence with the prompt's positions.
func (d *Drafter) Prefilled(prompt []int, features [][]float32) {
	d.finish()
	d.seq, d.active = d.a.begin(), true
	d.DGF.Prefilled(prompt, features)
	d.recorded = false
	d.a.record(&d.seq, prompt, features)
	d.keep(prompt, features)
	d.remember(prompt)
}

// Draft drafts a tree, noting whether there is one.
func (d *Drafter) Draft(ctx []int, p tree.Params) (*tree.Tree, error) {
	t, err := d.DGF.Draft(ctx, p)
	if err == nil && d.a.mem != nil {
		t = t.Graft(d.recall(ctx, p.Tokens), p.Tokens)
	}
	d.drafted = err == nil && t.Len() > 0
	return t, err
}

// Recall is the text memory's proposal alone, as a chain below the root:
// what a round costs when the draft model does not run (Recaller).
func (d *Drafter) Recall(ctx []int, p tree.Params) *tree.Tree {
	if d.a.mem == nil {
		return &tree.Tree{}
	}
	return (&tree.Tree{}).Graft(d.recall(ctx, p.Tokens), p.Tokens)
}

// recall is what the text memory proposes after ctx, at most limit
// tokens: the continuation of the longer remembered suffix, in finished
// requests or earlier in this one (the more recent on a tie).
//
// A continuation is trusted for up to twice the length of the suffix that
// matched (SuffixDecoding's α = 2), beyond the tree's depth if need be:
// the longest rule that did not lose τ anywhere (docs/measurements,
// "Continuation length").
func (d *Drafter) recall(ctx []int, limit int) []int {
	chain, n := d.a.mem.Lookup(ctx, limit)
	if d.own != nil {
		if own, on := d.own.Lookup(ctx, limit); own != nil && on >= n {
			chain, n = own, on
		}
	}
	return chain[:min(len(chain), 2*n)]
}

// remember adds committed tokens to the sequence's text.
func (d *Drafter) remember(tokens []int) {
	if d.a.mem == nil {
		return
	}
	if d.own == nil {
		d.own = NewTextMemory(ownMemoryTokens)
	}
	d.own.Append(tokens)
	d.text = append(d.text, tokens...)
}

// ownMemoryTokens bounds a sequence's own text memory: longer sequences
// are looked up in their newest part.
const ownMemoryTokens = 4096

// Accepted records the round's committed positions.
func (d *Drafter) Accepted(tokens []int, features [][]float32) {
	d.DGF.Accepted(tokens, features)
	d.first, d.recorded = d.a.record(&d.seq, tokens, features)
	d.keep(tokens, features)
	d.remember(tokens)
	if d.drafted {
		d.a.observe(float64(len(tokens)))
		d.drafted = false
		d.step()
	}
}

// Verified keeps the round's rejected nodes (see Records.AppendBranches)
// when its committed positions were recorded.
func (d *Drafter) Verified(nodes, parents []int, features [][]float32, path []int) {
	if d.recorded {
		d.a.rec.AppendBranches(d.first, nodes, parents, features, path)
		d.recorded = false
	}
}

// Reset ends the sequence.
func (d *Drafter) Reset() {
	d.finish()
	d.DGF.Reset()
}

// Adaptation is what the drafter's adapter has done so far.
func (d *Drafter) Adaptation() Stats { return d.a.Stats() }

// Version is the version of the draft's weights: in per-request mode the
// kept version the request's trials start from, else the version that
// drafted the last tree.
func (d *Drafter) Version() int {
	if d.a.cfg.Mode == PerRequest {
		return d.a.l.Version()
	}
	return d.DGF.Version()
}

// Mode is the adapter's mode.
func (d *Drafter) Mode() Mode { return d.a.cfg.Mode }

// Finish ends the sequence (Generate calls it when it returns): the
// trainer stops yielding to it, and its text joins the shared memory.
func (d *Drafter) Finish() { d.finish() }

func (d *Drafter) finish() {
	if d.active {
		d.a.end()
		d.active = false
	}
	if d.a.cfg.Mode == PerRequest && len(d.toks) > 0 {
		if err := d.a.l.Restore(); err != nil {
			d.a.fail(fmt.Errorf("adaptation: %w", err))
		}
	}
	d.toks, d.feats = d.toks[:0], d.feats[:0]
	// The finished text joins the shared memory in one piece, so that
	// sequences decoding side by side do not interleave there.
	if len(d.text) > 0 {
		d.a.mem.Begin()
		d.a.mem.Append(d.text)
		d.text = d.text[:0]
		d.own.Reset()
	}
}

// keep remembers the request's positions (per-request mode).
func (d *Drafter) keep(tokens []int, features [][]float32) {
	if d.a.cfg.Mode != PerRequest {
		return
	}
	d.toks = append(d.toks, tokens...)
	for _, f := range features {
		d.feats = append(d.feats, append([]float32(nil), f...))
	}
}

// step is per-request mode's gradient step on the request's newest
// positions, published as a trial for the next round.
func (d *Drafter) step() {
	a := d.a
	if a.cfg.Mode != PerRequest || len(d.toks) < 3 {
		return
	}
	lo := max(0, len(d.toks)-a.cfg.RequestWindow)
	w := Window{Tokens: d.toks[lo:], Features: d.feats[lo:]}
	if _, err := a.l.Train([]Window{w}); err != nil {
		a.fail(fmt.Errorf("adaptation: %w", err))
		return
	}
	if _, err := a.l.Publish(false); err != nil {
		a.fail(fmt.Errorf("adaptation: %w", err))
		return
	}
	a.mu.Lock()
	a.st.Runs++
	a.mu.Unlock()
}
