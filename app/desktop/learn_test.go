package desktop

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"

	"dovetail/app/runner/store"
	"dovetail/assets"
	"dovetail/models/draft"
)

// The speed and learning view charts every reply; learning pauses and
// resumes; the text memory clears once confirmed; a draft saved over
// another rolls back to it, and the model runs it.
func TestLearnView(t *testing.T) {
	st := store.At(t.TempDir())
	a := started(t, Options{Store: st})
	l := a.learn
	greedy(a) // replies of known, non-zero length
	for _, p := range []string{"Once upon a time", "The cat", "A dog"} {
		send(t, a, p)
	}
	a.tabs.SelectIndex(1)
	if n := len(l.tau.values); n > 3 || len(l.speed.values) != 3 {
		t.Fatalf("charts hold %d and %d points after 3 replies", n, len(l.speed.values))
	}
	for i, v := range l.speed.values {
		if v <= 0 {
			t.Errorf("reply %d charted at %.1f tokens/s", i, v)
		}
	}
	r, m := a.sess.loaded()
	if _, ok := r.Adaptation(); !ok {
		t.Fatalf("the embedded model's draft does not adapt: %s", l.trainer.Text)
	}
	if !strings.Contains(l.trainer.Text, "Kept version") || !strings.Contains(l.memory.Text, "tokens remembered") {
		t.Errorf("trainer %q, memory %q", l.trainer.Text, l.memory.Text)
	}

	test.Tap(l.pause)
	if st, _ := r.Adaptation(); !st.Paused || l.pause.Text != "Resume learning" || !strings.Contains(l.trainer.Text, "paused") {
		t.Fatalf("after Pause: paused %v, button %q, %q", st.Paused, l.pause.Text, l.trainer.Text)
	}
	test.Tap(l.pause)
	if st, _ := r.Adaptation(); st.Paused || l.pause.Text != "Pause learning" {
		t.Fatalf("after Resume: paused %v, button %q", st.Paused, l.pause.Text)
	}

	// Clear asks first; "Keep it" keeps the memory.
	before, _ := r.Adaptation()
	test.Tap(l.clear)
	tapButton(t, topOverlay(t, a), "Keep it")
	if st, _ := r.Adaptation(); before.Remembered == 0 || st.Remembered != before.Remembered {
		t.Errorf("after Keep it: %d remembered, %d before", st.Remembered, before.Remembered)
	}
	test.Tap(l.clear)
	tapButton(t, topOverlay(t, a), "Clear")
	if st, _ := r.Adaptation(); st.Remembered != 0 || l.memory.Text != "0 tokens remembered" {
		t.Errorf("after Clear: %d remembered, %q", st.Remembered, l.memory.Text)
	}

	// Two drafts installed one over the other: the first is kept.
	a.sess.close()
	for _, v := range []string{"101", "102"} {
		ck, err := draft.Parse("embedded:"+assets.DefaultDraftName, assets.DefaultDraft)
		if err != nil {
			t.Fatal(err)
		}
		ck.Meta[store.MetaVersion] = v
		if _, _, err := st.Install(ck); err != nil {
			t.Fatal(err)
		}
	}
	a.chat.loadModel("")
	waitLoaded(t, a)
	if l.rollback.Disabled() || !strings.Contains(l.drafts.Text, "(this model): version 102") {
		t.Fatalf("rollback disabled %v, drafts %q", l.rollback.Disabled(), l.drafts.Text)
	}
	test.Tap(l.rollback)
	waitLoaded(t, a)
	if !strings.Contains(l.drafts.Text, "(this model): version 101") {
		t.Errorf("after the rollback: %q", l.drafts.Text)
	}
	if r, _ := a.sess.loaded(); !strings.HasSuffix(r.Draft().Name, m.Fingerprint+".gguf") {
		t.Errorf("the draft running is %s", r.Draft().Name)
	}
}

// Turning the text memory off loads the model again without one, and
// the choice is kept.
func TestLearnMemoryOff(t *testing.T) {
	st := store.At(t.TempDir())
	a := started(t, Options{Store: st})
	a.learn.memOff.SetChecked(true)
	waitLoaded(t, a)
	if !loadPrefs(st).MemoryOff {
		t.Fatal("memory off is not kept")
	}
	send(t, a, "Once upon a time")
	a.learn.refresh()
	r, _ := a.sess.loaded()
	if st, ok := r.Adaptation(); !ok || st.Remembered != 0 {
		t.Errorf("with the memory off: %d tokens remembered", st.Remembered)
	}
}
