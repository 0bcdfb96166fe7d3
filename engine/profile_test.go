package engine_test

import (
	"testing"
	"time"

	"dovetail/engine"
	"dovetail/engine/enginetest"
)

func TestProfileTarget(t *testing.T) {
	m := enginetest.NewMarkov(20, 1, 1)
	m.Ctx = 100
	p, err := engine.ProfileTarget(m, 16, 16, []int{1, 4, 16}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if p.PrefillTokensPerSec <= 0 || p.DecodeTokensPerSec <= 0 || len(p.Verify) != 3 || p.Decode <= 0 {
		t.Errorf("profile %+v", p)
	}
	if m.Len() != 0 {
		t.Errorf("profiling left %d tokens in the sequence", m.Len())
	}
	if _, err := engine.ProfileTarget(m, 64, 64, []int{64}, 1); err == nil {
		t.Error("a profile larger than the context was accepted")
	}
	if _, err := engine.ProfileTarget(m, 16, 16, []int{4}, 0); err == nil {
		t.Error("a profile of zero repetitions was accepted")
	}
}

// lenAtExtend records the sequence's length when each verification starts.
type lenAtExtend struct {
	engine.Target
	at []int
}

func (l *lenAtExtend) Extend(tokens, parents []int) ([][]float32, [][]float32, error) {
	l.at = append(l.at, l.Len())
	return l.Target.Extend(tokens, parents)
}

// A profile at a depth verifies after depth+prompt positions, and one
// deeper than the context is refused.
func TestProfileTargetAt(t *testing.T) {
	m := enginetest.NewMarkov(20, 1, 1)
	m.Ctx = 200
	l := &lenAtExtend{Target: m}
	if _, err := engine.ProfileTargetAt(l, 100, 16, 16, []int{1, 4}, 2); err != nil {
		t.Fatal(err)
	}
	if len(l.at) != 4 {
		t.Fatalf("%d verifications, want 4", len(l.at))
	}
	for _, n := range l.at {
		if n != 116 {
			t.Fatalf("a verification started after %d positions, want 116", n)
		}
	}
	if _, err := engine.ProfileTargetAt(m, 170, 16, 16, []int{16}, 1); err == nil {
		t.Error("a profile deeper than the context was accepted")
	}
	if _, err := engine.ProfileTargetAt(m, -1, 16, 16, []int{16}, 1); err == nil {
		t.Error("a negative depth was accepted")
	}
}

// A profile within a time budget runs three rounds however long they
// took, and all of them while the budget lasts.
func TestProfileTargetWithin(t *testing.T) {
	for _, c := range []struct {
		within time.Duration
		rounds int
	}{{time.Nanosecond, 3}, {time.Hour, 7}} {
		m := enginetest.NewMarkov(20, 1, 1)
		m.Ctx = 100
		l := &lenAtExtend{Target: m}
		if _, err := engine.ProfileTargetWithin(l, 16, 16, []int{1, 4}, 7, c.within); err != nil {
			t.Fatal(err)
		}
		if got := len(l.at); got != 2*c.rounds {
			t.Errorf("within %v: %d verifications, want %d rounds of 2", c.within, got, c.rounds)
		}
	}
}
