package desktop

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/test"

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
