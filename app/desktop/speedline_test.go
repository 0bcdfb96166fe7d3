package desktop

import (
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"

	"dovetail/app/runner"
	"dovetail/internal/plural"
)

// belowOne is a ratio below 1 in a speed line.
var belowOne = regexp.MustCompile(`(^|[^0-9.])0\.[0-9]+×`)

// A reply's line compares with the target alone only where speculation
// ran and won; where the planner kept it off it says so in words, and a
// reply that drafted but lost names the target alone's speed, never a
// ratio below 1.
func TestStatsLine(t *testing.T) {
	for _, c := range []struct {
		name string
		s    MsgStats
		want string
	}{
		{"faster", MsgStats{Tokens: 12, TokensPerSec: 30.25, FirstTokenMs: 80, Rounds: 4, Tau: 3, Drafted: true, Baseline: 20, DraftVersion: 2, Stopped: true},
			"12 tokens · 30.2 tokens/s · first token 80 ms · 4 rounds, τ 3.00, drafted by version 2 · 1.51× the target alone (20.0 tokens/s on this machine) · stopped"},
		{"no rounds", MsgStats{Tokens: 333, TokensPerSec: 14000, FirstTokenMs: 0.42, PlainSteps: 333, Drafted: true, Baseline: 12000},
			"333 tokens · 14,000 tokens/s · first token 420 µs · " + specOffWords},
		{"probes only", MsgStats{Tokens: 333, TokensPerSec: 1100, FirstTokenMs: 2.5, Rounds: 5, Tau: 1, PlainSteps: 328, Drafted: true, Baseline: 39245},
			"333 tokens · 1,100 tokens/s · first token 2.5 ms · " + specOffWords + " (5 trial rounds to keep measuring, τ 1.00)"},
		{"slower", MsgStats{Tokens: 40, TokensPerSec: 10, FirstTokenMs: 15, Rounds: 20, Tau: 2, Drafted: true, Baseline: 40},
			"40 tokens · 10.0 tokens/s · first token 15 ms · 20 rounds, τ 2.00 · not yet faster than the target alone (40.0 tokens/s on this machine): the draft is learning"},
		{"no draft", MsgStats{Tokens: 1, TokensPerSec: 9, Baseline: 9},
			"1 token · 9.0 tokens/s"},
	} {
		got := statsLine(&c.s, false)
		if got != c.want {
			t.Errorf("%s: %q\nwant %q", c.name, got, c.want)
		}
		if belowOne.MatchString(got) {
			t.Errorf("%s: a ratio below 1: %q", c.name, got)
		}
	}
	if got := statsLine(&MsgStats{TokensPerSec: 9}, true); got != "9.0 tokens/s" {
		t.Errorf("streaming: %q", got)
	}
	if statsLine(nil, false) != "" {
		t.Error("no stats, yet a line")
	}
}

// Times under a millisecond read in µs; speeds with thousands separated.
func TestFormatting(t *testing.T) {
	for ms, want := range map[float64]string{0.0004: "0 µs", 0.042: "42 µs", 0.999: "999 µs", 1: "1.0 ms", 9.96: "10.0 ms", 80: "80 ms", 12345: "12.3 s"} {
		if got := formatMs(ms); got != want {
			t.Errorf("formatMs(%v) = %q, want %q", ms, got, want)
		}
	}
	for v, want := range map[float64]string{0: "0.0", 78.24: "78.2", 100: "100", 1100.4: "1,100", 39245.1: "39,245", 1234567: "1,234,567"} {
		if got := formatRate(v); got != want {
			t.Errorf("formatRate(%v) = %q, want %q", v, got, want)
		}
	}
	if plural.Of(1, "reply") != "1 reply" || plural.Of(5, "round") != "5 rounds" || plural.Of(2, "reply") != "2 replies" {
		t.Error(plural.Of(1, "reply"), plural.Of(5, "round"), plural.Of(2, "reply"))
	}
}

// Setup's prediction is a range; a draft that does not pay is said in
// words, not as a speed.
func TestPredictionText(t *testing.T) {
	if got := predictionText(runner.Prediction{}); got != "not calibrated: no prediction" {
		t.Errorf("uncalibrated: %q", got)
	}
	got := predictionText(runner.Prediction{Plain: 39245.1, WithDraft: 52000, Low: 36000, High: 61000})
	if want := "39,245 tokens/s alone → 52,000 with the draft as it is today (36,000–61,000)"; got != want {
		t.Errorf("paying draft: %q\nwant %q", got, want)
	}
	got = predictionText(runner.Prediction{Plain: 78.2, WithDraft: 78.2, Low: 70, High: 84})
	if !strings.HasPrefix(got, "78.2 tokens/s alone (70.0–84.0)") || !strings.Contains(got, "the target alone is faster") {
		t.Errorf("draft that does not pay: %q", got)
	}
}

// Both charts count every reply; τ has a gap where a reply drafted
// nothing; a marker, named, at each reply where the version changed.
func TestChartSeries(t *testing.T) {
	h := []requestStat{{Tau: 2, Rounds: 3, TokensPerSec: 10}, {TokensPerSec: 20, DraftVersion: 1},
		{Tau: 3, Rounds: 2, TokensPerSec: 30, DraftVersion: 1}, {Tau: 4, Rounds: 1, TokensPerSec: 40, DraftVersion: 2}}
	speed, tau, marks := chartSeries(h)
	if !slices.Equal(speed, []float64{10, 20, 30, 40}) || len(tau) != len(speed) {
		t.Fatalf("speed %v, τ %v", speed, tau)
	}
	if tau[0] != 2 || !math.IsNaN(tau[1]) || tau[2] != 3 || tau[3] != 4 {
		t.Errorf("τ %v", tau)
	}
	if !slices.Equal(marks, []marker{{1, "v1"}, {3, "v2"}}) {
		t.Errorf("markers %v", marks)
	}
}

// Rolling back needs a previous draft: one a save replaced, the saved
// draft a run that published started from, or the shipped one.
func TestRollBackWay(t *testing.T) {
	const saved = "/d/drafts/fp.gguf"
	for _, c := range []struct {
		prev, published bool
		name            string
		want            rollBack
	}{
		{false, false, "dgf:" + saved, noRollBack},
		{true, false, "dgf:" + saved, restoreDraft},
		{false, true, "dgf:" + saved, restoreDraft},
		{false, true, "dgf:embedded:stories15M-draft.gguf", shelveDraft},
		{true, true, "dgf:embedded:stories15M-draft.gguf", shelveDraft},
		{false, true, "dgf:untrained", noRollBack}, // nothing earlier to return to
		{false, false, "dgf:embedded:stories15M-draft.gguf", noRollBack},
	} {
		if got := rollBackWay(c.prev, c.published, startedFrom(c.name, saved)); got != c.want {
			t.Errorf("%+v: %v", c, got)
		}
	}
}
