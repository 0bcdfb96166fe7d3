package adapt

import (
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"dovetail/device"
	"dovetail/dgf"
	"dovetail/dgf/dgftest"
	"dovetail/models/draft"
	"dovetail/train"
)

// stepCounter is a learner that counts the training steps begun and
// ended.
type stepCounter struct {
	*train.Learner
	begun, ended atomic.Int32
}

func (s *stepCounter) Train(ws []Window) (draft.Score, error) {
	s.begun.Add(1)
	sc, err := s.Learner.Train(ws)
	if err == nil {
		s.ended.Add(1)
	}
	return sc, err
}

// feed records n random positions of one sequence, waking the trainer.
func feed(a *Adapter, rng *rand.Rand, n, hidden, vocab int) {
	w := dgftest.RandWindow(rng, n-1, hidden, vocab, 1)
	seq := uint64(1)
	a.record(&seq, w.Tokens, w.Features)
}

// Close interrupts a training step in flight — the step does not run to
// its end — and the trainer stops within the bound, and the learner's
// kept version, which the runner saves, is the one last published, not
// the shadow trained since.
func TestAdapterCloseInterruptsStep(t *testing.T) {
	c := dgftest.TinyStories656KDraft
	d, err := dgf.NewDraft(device.NewHost(1), c, dgftest.Target(1, c))
	if err != nil {
		t.Fatal(err)
	}
	d.Init(1)
	live := dgf.NewLive(d, 0)
	defer live.Close()
	cfg := DefaultConfig()
	// Steps of 256 positions, unrolled twice (a tenth of a second or
	// more on the CPU), and a run that never reaches its comparison.
	cfg.Window, cfg.Batch, cfg.Steps, cfg.HeldOut, cfg.MemoryTokens = 32, 8, 1<<20, 1, 0
	cfg.Control.MinRecords = 64
	tc := train.DefaultTrainConfig()
	tc.Unroll = 2
	l := &stepCounter{Learner: train.NewLearner(live, device.NewHost(1), tc, cfg.Batch*cfg.Window, cfg.Window, 3)}
	defer l.Free()
	a, err := NewAdapter(l, c.Hidden, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	feed(a, rng, 1024, c.Hidden, c.Vocab)
	// A version published before the trainer starts (this goroutine
	// holds the learner until then).
	ws := a.rec.Sample(rng, 2, cfg.Window, false)
	if _, err := l.Learner.Train(ws); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Publish(true); err != nil {
		t.Fatal(err)
	}
	published, err := l.Checkpoint("fp", "target")
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	feed(a, rng, 64, c.Hidden, c.Vocab)
	// A step done since the publication (the shadow has moved), and the
	// next one under way.
	deadline := time.Now().Add(5 * time.Minute)
	for l.ended.Load() < 1 || l.begun.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the trainer did not train")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// Close waits for the trainer at most StopWait; the trainer itself
	// stops within a device operation.
	const bound = StopWait + 2*time.Second
	select {
	case <-a.Stopped():
	case <-time.After(bound - time.Since(start)):
		t.Fatalf("the trainer had not stopped %v after Close began", bound)
	}
	took := time.Since(start)
	t.Logf("steps begun %d, ended %d; stopped %v after Close began", l.begun.Load(), l.ended.Load(), took)
	if l.ended.Load() != l.begun.Load()-1 {
		t.Errorf("%d steps begun, %d ended: the one in flight ran to its end", l.begun.Load(), l.ended.Load())
	}
	saved, err := l.Checkpoint("fp", "target")
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range published.Tensors {
		if !slices.Equal(saved.Tensors[name], w) {
			t.Fatalf("%s: the kept version after Close is not the one published", name)
		}
	}
}

// stuckLearner is a learner whose Train or Publish blocks until released,
// whatever Stop says: a trainer that cannot see the stop in time (an
// idle-priority thread on a busy machine), or one publishing.
type stuckLearner struct {
	inTrain, inPublish chan struct{} // closed once there
	release            chan struct{}
	blockPublish       bool
	published          atomic.Int32
}

func newStuck(blockPublish bool) *stuckLearner {
	return &stuckLearner{inTrain: make(chan struct{}), inPublish: make(chan struct{}), release: make(chan struct{}), blockPublish: blockPublish}
}

func (s *stuckLearner) Train([]Window) (draft.Score, error) {
	if !s.blockPublish {
		close(s.inTrain)
		<-s.release
	}
	return draft.Score{}, nil
}

func (s *stuckLearner) Compare([]Window) (draft.Score, draft.Score, error) {
	return draft.Score{Tau: 2}, draft.Score{Tau: 1}, nil
}

func (s *stuckLearner) Publish(bool) (int, error) {
	if s.blockPublish && s.published.Load() == 0 {
		close(s.inPublish)
		<-s.release
	}
	return int(s.published.Add(1)), nil
}

func (s *stuckLearner) Restore() error { return nil }
func (s *stuckLearner) Version() int   { return int(s.published.Load()) }
func (s *stuckLearner) Stop()          {}

// stuckAdapter runs l with runs of one step on 8-position windows.
func stuckAdapter(t *testing.T, l Learner) *Adapter {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Window, cfg.Batch, cfg.Steps, cfg.HeldOut, cfg.MinGain, cfg.MemoryTokens = 8, 1, 1, 1, 0, 0
	cfg.Control.MinRecords = 32
	a, err := NewAdapter(l, 4, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.Start()
	feed(a, rand.New(rand.NewPCG(1, 1)), 64, 4, 16)
	return a
}

// A trainer that does not stop in time does not hold Close past
// StopWait; Stopped says when it has returned.
func TestAdapterCloseBounded(t *testing.T) {
	l := newStuck(false)
	a := stuckAdapter(t, l)
	<-l.inTrain
	start := time.Now()
	a.Close()
	if took := time.Since(start); took < StopWait || took > StopWait+2*time.Second {
		t.Errorf("Close took %v with the trainer stuck; want StopWait (%v) and little more", took, StopWait)
	}
	select {
	case <-a.Stopped():
		t.Fatal("Stopped before the trainer returned")
	default:
	}
	close(l.release)
	select {
	case <-a.Stopped():
	case <-time.After(5 * time.Second):
		t.Fatal("the trainer did not return once released")
	}
	if l.published.Load() != 0 {
		t.Error("a version was published after Close")
	}
}

// Close waits out a publication under way, even past StopWait: what it
// leaves to save is a whole version.
func TestAdapterCloseWaitsForPublication(t *testing.T) {
	l := newStuck(true)
	a := stuckAdapter(t, l)
	<-l.inPublish
	closed := make(chan struct{})
	go func() { a.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned during a publication")
	case <-time.After(StopWait + 200*time.Millisecond):
	}
	close(l.release)
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after the publication")
	}
	if n := l.published.Load(); n != 1 {
		t.Errorf("%d publications, want the one under way alone", n)
	}
}
