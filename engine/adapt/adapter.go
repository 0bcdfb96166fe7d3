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
	"dovetail/internal/osthread"
)

// Adapter runs online adaptation of one live draft: the drafters it hands
// out (one per concurrent sequence) record what the target verified and
// measure τ; a goroutine trains the learner's shadow and publishes it.
type Adapter struct {
	cfg Config
	l   Learner
	rec *Records
	mem *TextMemory // nil: none

	mu         sync.Mutex
	ctl        Control
	seq        uint64
	gap        bool // collection paused since the last record: a new sequence starts
	fresh      int  // positions recorded since the last training run
	busy       int  // sequences decoding
	st         Stats
	err        error
	started    bool // the trainer runs and Close has not stopped it
	ran        bool // the trainer was started
	paused     bool
	closing    bool          // Close has begun: nothing more is published
	publishing chan struct{} // closed when the publication under way (and its onPublish) ends; nil: none
	rng        *rand.Rand
	wake       chan struct{}
	stop       chan struct{}
	done       chan struct{}
	onPublish  func(version int)
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
	a.started, a.ran = true, true
	go a.train()
}

// Close stops the trainer, interrupting its step (Learner.Stop), puts a
// per-request trial back, and returns the first error adaptation met. It
// waits for the trainer at most StopWait, and for a publication under way
// (a copy of the weights) to end: afterwards the learner's kept version is
// the last one published and stays so, whether or not the trainer has
// returned yet (Stopped says when it has; until then the learner is still
// in use and must not be freed).
func (a *Adapter) Close() error {
	a.mu.Lock()
	started := a.started
	a.started = false
	a.closing = true
	a.mu.Unlock()
	if started {
		close(a.stop)
		a.l.Stop()
		a.waitStopped()
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

// StopWait bounds how long Close waits for the trainer to stop. A step
// ends within a device operation of being told to (a few milliseconds on
// a GPU, tens to hundreds on the CPU); a trainer on an idle-priority
// thread of a busy machine may not get the CPU to see it.
const StopWait = time.Second

// waitStopped waits for the trainer's goroutine for up to StopWait, then
// for the publication it may be in.
func (a *Adapter) waitStopped() {
	t := time.NewTimer(StopWait)
	defer t.Stop()
	select {
	case <-a.done:
		return
	case <-t.C:
	}
	a.mu.Lock()
	pub := a.publishing
	a.mu.Unlock()
	if pub != nil {
		<-pub
	}
}

// Stopped is closed once the trainer's goroutine has returned (at once if
// it never started): after Close, the learner is the caller's again.
func (a *Adapter) Stopped() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.ran {
		return closedChan
	}
	return a.done
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// beginPublish marks a publication under way, unless Close has begun.
func (a *Adapter) beginPublish() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closing {
		return false
	}
	a.publishing = make(chan struct{})
	return true
}

// endPublish marks the publication done.
func (a *Adapter) endPublish() {
	a.mu.Lock()
	defer a.mu.Unlock()
	close(a.publishing)
	a.publishing = nil
}

// stopped is err, or errStopped once Close has stopped the trainer (the
// learner's own error for an interrupted step is then no failure).
func (a *Adapter) stopped(err error) error {
	select {
	case <-a.stop:
		return errStopped
	default:
		return err
	}
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
			return a.stopped(err)
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
		return a.stopped(err)
	}
	better := shadow.Tau-kept.Tau > cfg.MinGain
	v := 0
	if better {
		// Close waits for a publication under way, and none starts
		// after it began: what it saves is a whole version.
		if !a.beginPublish() {
			return errStopped
		}
		defer a.endPublish() // after onPublish: it saves the draft
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
