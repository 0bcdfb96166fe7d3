package engine_test

import (
	"testing"

	"dovetail/engine"
)

func TestProfileTarget(t *testing.T) {
	m := newMarkov(20, 1, 1)
	m.ctx = 100
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
