package runner

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"dovetail/engine"
	"dovetail/engine/adapt"
	"dovetail/engine/tree"
)

// A new draft starts in the background: the runner says at once what it
// will draft with, requests running while it starts give the target's own
// output, and once it has started every slot drafts with it and adapts.
func TestDayZeroDrafterStartsBehind(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	o := options(t)
	o.Draft, o.Plan = DraftChoice{Kind: DraftNone}, false
	plain, _ := greedy(t, start(t, m, o), "Lily and Tom", 40)

	o = options(t)
	o.Plan, o.Greedy, o.Slots, o.Tree = false, true, 2, tree.Laptop
	r, err := New(m, o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if info := r.Draft(); info.Name != "dgf:untrained" || info.Adapt != adapt.Background || info.Trainer == "" {
		t.Fatalf("while starting: %+v", info)
	}
	r.PauseLearning(true) // asked before the draft is there
	var wg sync.WaitGroup
	for i := range r.Slots() {
		wg.Add(1)
		go func() { // beside the start, under the race detector too
			defer wg.Done()
			req := engine.Request{Prompt: m.Tok.Encode("Lily and Tom", true, false), MaxTokens: 40, Stop: m.Tok.IsEOG}
			var out []int
			if _, err := r.Slot(i).Generate(context.Background(), req, func(tok int) error { out = append(out, tok); return nil }); err != nil {
				t.Error(err)
			}
			if !slices.Equal(out, plain) {
				t.Errorf("slot %d while the draft starts: %v, plain %v", i, out, plain)
			}
		}()
	}
	wg.Wait()
	r.WaitDraft()
	st, ok := r.Adaptation()
	if !ok || !st.Paused {
		t.Fatalf("after the start: adapting %v, paused %v", ok, st.Paused)
	}
	for i := range r.Slots() {
		if r.Slot(i).Drafter() == nil {
			t.Fatalf("slot %d has no drafter", i)
		}
	}
	out, gs := greedy(t, r, "Lily and Tom", 40)
	if !slices.Equal(out, plain) || gs.Rounds == 0 {
		t.Errorf("with the new draft: %d rounds, %v, plain %v", gs.Rounds, out, plain)
	}
}

// Closing a runner whose new draft may still be starting waits for the
// start to stop (under the race detector too), and saves nothing of it.
func TestDayZeroDrafterClosedWhileStarting(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	for range 3 {
		o := options(t)
		r, err := New(m, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		if ds, err := o.Store.Drafts(); err != nil || len(ds) != 0 {
			t.Errorf("saved %v (%v)", ds, err)
		}
	}
}

// A new draft waits for a quiet moment: it does not start while a
// generation runs, and starts once none has run for a while.
func TestDayZeroDrafterWaitsForQuiet(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	made := time.Now()
	r, err := New(m, options(t))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	req := engine.Request{Prompt: m.Tok.Encode("Lily and Tom", true, false), MaxTokens: 30, Stop: m.Tok.IsEOG}
	from := time.Now()
	_, err = r.Slot(0).Generate(context.Background(), req, func(int) error {
		time.Sleep(10 * time.Millisecond) // a slow reader: the generation lasts
		return nil
	})
	to := time.Now()
	if err != nil {
		t.Fatal(err)
	}
	r.WaitDraft()
	if _, ok := r.Adaptation(); !ok {
		t.Fatal("the new draft did not start once the runner was quiet")
	}
	// A slow machine may leave 100 ms between New and the request, and the
	// start may then run beside it: what must not happen is a start begun
	// while a generation ran.
	z := r.draft.dayZero
	z.mu.Lock()
	began := z.began
	z.mu.Unlock()
	if began.After(from) && began.Before(to) {
		t.Errorf("the new draft began %v into a generation of %v", began.Sub(from), to.Sub(from))
	}
	if began.Sub(made) < quietBefore {
		t.Errorf("the new draft began %v after the runner was made, before it was quiet", began.Sub(made))
	}
}
