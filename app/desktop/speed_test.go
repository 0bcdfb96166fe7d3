package desktop

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/test"

	"dovetail/app/runner"
	"dovetail/app/runner/store"
	"dovetail/engine"
	"dovetail/engine/tree"
)

// wrong drafts one token the target never takes, and takes its time: a
// draft that never pays, which the planner turns off.
type wrong struct{ vocab int }

func (w wrong) Draft(ctx []int, p tree.Params) (*tree.Tree, error) {
	time.Sleep(2 * time.Millisecond)
	tok := (ctx[len(ctx)-1] + 7) % w.vocab
	return &tree.Tree{Tokens: []int{tok}, Parents: []int{-1}, Depths: []int{1}, Scores: []float64{0}, Recalled: []bool{false}}, nil
}
func (wrong) Accepted([]int, [][]float32) {}
func (wrong) Reset()                      {}
func (wrong) Finish()                     {}

// firstToken is the status line's first-token time: µs under a
// millisecond, never "0 ms".
var firstToken = regexp.MustCompile(`first token ([1-9][0-9]* µs|0 µs|[0-9.]+ ms|[0-9.]+ s)`)

// Where the planner finds drafting does not pay it stops drafting, and
// the reply's line says so in words, with no ratio below 1; the first
// token's time reads in µs or ms.
func TestSpeedLineSpeculationOff(t *testing.T) {
	_, _, vocab := plainReply(t, "Once upon a time")
	a := started(t, Options{NewDrafter: func(int) (engine.Drafter, error) { return wrong{vocab}, nil }})
	greedy(a)
	got := send(t, a, "Once upon a time")
	line := a.chat.views[1].stats.Text
	if got.Stats == nil || got.Stats.PlainSteps <= got.Stats.Rounds {
		t.Fatalf("stats %+v: the planner kept drafting a draft that never pays", got.Stats)
	}
	if !strings.Contains(line, specOffWords) || strings.Contains(line, "×") {
		t.Errorf("the reply's line %q: want %q and no ratio", line, specOffWords)
	}
	if st := a.chat.status.Text; !firstToken.MatchString(st) || strings.Contains(st, "first token 0 ms") {
		t.Errorf("status %q", st)
	}
}

// The charts count the same replies, say so, and come back after a
// restart; a fresh model says why its charts are empty; a version change
// is marked on the chart, named.
func TestLearnHistoryAcrossRestart(t *testing.T) {
	st := store.At(t.TempDir())
	a := started(t, Options{Store: st})
	a.learn.refresh()
	if a.learn.speed.points() != 0 || !strings.Contains(a.learn.speed.empty, "No replies yet") {
		t.Fatalf("a fresh model's chart: %d points, %q", a.learn.speed.points(), a.learn.speed.empty)
	}
	greedy(a)
	for _, p := range []string{"Once upon a time", "The cat"} {
		send(t, a, p)
	}
	a.learn.refresh()
	if len(a.learn.speed.values) != 2 || len(a.learn.tau.values) != 2 || !strings.Contains(a.learn.speed.summary, "2 replies") ||
		!strings.Contains(a.learn.tau.summary, "of 2 replies") {
		t.Fatalf("after 2 replies: speed %v %q, τ %v %q", a.learn.speed.values, a.learn.speed.summary, a.learn.tau.values, a.learn.tau.summary)
	}
	_, m := a.sess.loaded()
	a.Close()

	// A version published before the restart: the kept history has it.
	h, err := loadReplies(st, m.Fingerprint)
	if err != nil || len(h) != 2 {
		t.Fatalf("kept history %v, %v", h, err)
	}
	h[1].DraftVersion = h[0].DraftVersion + 3
	if err := saveReplies(st, m.Fingerprint, h); err != nil {
		t.Fatal(err)
	}
	b := started(t, Options{Store: st})
	b.learn.refresh()
	if len(b.learn.speed.values) != 2 || !strings.Contains(b.learn.speed.summary, "2 replies") {
		t.Fatalf("after a restart: %v, %q", b.learn.speed.values, b.learn.speed.summary)
	}
	b.learn.speed.Resize(b.learn.speed.MinSize().AddWidthHeight(100, 40))
	want := fmt.Sprintf("v%d", h[1].DraftVersion)
	found := false
	for _, o := range test.WidgetRenderer(b.learn.speed).Objects() {
		if tx, ok := o.(*canvas.Text); ok && tx.Text == want {
			found = true
		}
	}
	if !found {
		t.Errorf("no marker named %s on the chart", want)
	}
	if strings.Contains(b.learn.trainer.Text, "τ now 0.00") {
		t.Errorf("after a restart the trainer says %q", b.learn.trainer.Text)
	}
}

// quickAdapt trains on little and publishes every run, at normal
// priority: a test sees a version published within a few replies.
func quickAdapt() *runner.Adapt {
	a := runner.DefaultAdapt()
	a.Idle = false
	a.Engine.Window, a.Engine.Batch, a.Engine.Steps, a.Engine.HeldOut, a.Engine.MinGain = 8, 4, 2, 2, -1
	a.Engine.Control.MinRecords = 32
	a.SaveEvery = 0
	return &a
}

// Roll back is offered as soon as the draft publishes a version, without
// a restart; the trainer, the saved drafts and the chart then name the
// same version, and rolling back runs the shipped draft again.
func TestRollBackAfterPublication(t *testing.T) {
	st := store.At(t.TempDir())
	a := started(t, Options{Store: st, Adapt: quickAdapt()})
	greedy(a)
	l := a.learn
	l.refresh()
	if !l.rollback.Disabled() {
		t.Fatal("Roll back offered before any version was published")
	}
	r, _ := a.sess.loaded()
	for i := 0; ; i++ {
		if s, _ := r.Adaptation(); s.Published > 0 {
			break
		}
		if i == 40 {
			t.Fatal("nothing published after 40 replies")
		}
		send(t, a, "Once upon a time, a little girl")
	}
	// Paused, the trainer publishes nothing more: the numbers hold still
	// for the comparison. The chart's last reply ends after the pause.
	a.tabs.SelectIndex(1)
	test.Tap(l.pause)
	waitFor(t, "the training run's end", func() bool { s, _ := r.Adaptation(); return !s.Training })
	send(t, a, "Once upon a time, a little girl")
	l.refresh()
	s, _ := r.Adaptation()
	if l.rollback.Disabled() {
		t.Fatalf("Roll back disabled after version %d was published: %q", s.Version, l.drafts.Text)
	}
	v := fmt.Sprintf("version %d", s.Version)
	if !strings.Contains(l.trainer.Text, v) || !strings.Contains(l.drafts.Text, v+" running") {
		t.Errorf("the trainer says %q, the saved drafts %q, want %s", l.trainer.Text, l.drafts.Text, v)
	}
	h, _ := a.sess.history()
	if last := h[len(h)-1].DraftVersion; last != s.Version {
		t.Errorf("the chart's last reply has version %d, the trainer %d", last, s.Version)
	}
	if len(l.speed.markers) == 0 || l.speed.markers[len(l.speed.markers)-1].label != fmt.Sprintf("v%d", s.Version) {
		t.Errorf("markers %v, want the last at v%d", l.speed.markers, s.Version)
	}
	test.Tap(l.rollback)
	waitLoaded(t, a)
	if r, _ := a.sess.loaded(); !strings.HasPrefix(r.Draft().Name, "dgf:embedded:") {
		t.Errorf("after the rollback the draft running is %s", r.Draft().Name)
	}
	a.learn.refresh()
	if l.rollback.Disabled() {
		t.Error("after the rollback, rolling forward again is not offered")
	}
}
