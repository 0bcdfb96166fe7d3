package runner

import (
	"os"
	"strings"
	"testing"

	"dovetail/engine/tree"
)

// Settings round-trip through the file, each model's by fingerprint,
// saving one model's keeping the others'; a damaged file is set aside,
// never overwritten.
func TestSettingsRoundTrip(t *testing.T) {
	st := options(t).Store
	a := ModelSettings{Name: "a.gguf", Threads: 1, Ctx: 256, Draft: "auto", Device: "cpu", Tree: tree.Laptop, Plan: true,
		Predicted: Prediction{Plain: 10, WithDraft: 20, Low: 9.5, High: 30}}
	b := a
	b.Name, b.Ctx = "b.gguf", 512
	if err := SaveSettings(st, map[string]ModelSettings{"fa": a}); err != nil {
		t.Fatal(err)
	}
	if err := SaveSettings(st, map[string]ModelSettings{"fb": b}); err != nil {
		t.Fatal(err)
	}
	s, err := LoadSettings(st)
	if err != nil || len(s.Models) != 2 || s.Models["fa"].Ctx != 256 || s.Models["fb"].Ctx != 512 || s.Models["fa"].Predicted != a.Predicted || s.Models["fa"].Tree != tree.Laptop {
		t.Fatalf("read back %+v, %v", s, err)
	}
	os.WriteFile(st.SettingsPath(), []byte("{half a file"), 0o644)
	if _, err := LoadSettings(st); err == nil {
		t.Error("a damaged settings file read")
	}
	if err := SaveSettings(st, map[string]ModelSettings{"fa": a}); err != nil {
		t.Fatal(err)
	}
	if kept, err := os.ReadFile(st.SettingsPath() + ".corrupt"); err != nil || string(kept) != "{half a file" {
		t.Errorf("the damaged file was not kept aside: %v", err)
	}
}

// What the user gives beats the settings, which beat the defaults.
func TestSettingsPrecedence(t *testing.T) {
	ms := ModelSettings{Threads: 1, Ctx: 300, Draft: "ngram", Device: "cpu", Tree: tree.Laptop, Plan: false,
		Predicted: Prediction{WithDraft: 42}}
	o := DefaultOptions()
	used := ms.Apply(&o, func(name string) bool { return name == "ctx" })
	if o.Threads != 1 || o.Ctx != 0 || o.Draft != (DraftChoice{Kind: DraftNgram}) || o.Device != (DeviceChoice{Kind: DeviceCPU}) || o.Tree != tree.Laptop || o.Plan || o.Predicted != 42 {
		t.Errorf("options %+v", o)
	}
	if got := strings.Join(used, ", "); strings.Contains(got, "ctx") || !strings.Contains(got, "threads 1") || !strings.Contains(got, "draft ngram") {
		t.Errorf("used %q", got)
	}
	// Settings from a bigger machine do not ask for threads it lacks.
	o = DefaultOptions()
	ms.Threads = 100000
	ms.Apply(&o, func(string) bool { return false })
	if o.Threads != 0 {
		t.Errorf("threads %d applied", o.Threads)
	}
}

// A runner's generations are recorded with what was predicted, and the
// drift of measurements from predictions is their median ratio.
func TestHistory(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	o := options(t)
	o.Draft, o.Predicted = DraftChoice{Kind: DraftNgram}, 1e6
	r := start(t, m, o)
	greedy(t, r, "Once upon a time", 40)
	greedy(t, r, "Once upon a time", 40)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := History(o.Store, m.Fingerprint)
	if err != nil || len(h) != 1 || h[0].Tokens < 40 || h[0].Measured <= 0 || h[0].Predicted != 1e6 || h[0].Draft != "ngram" {
		t.Fatalf("history %+v, %v", h, err)
	}
	if ratio, n := Drift(h); n != 1 || ratio >= 1-MaxDrift {
		t.Errorf("a prediction of a million tokens/s drifts %.4f (%d)", ratio, n)
	}
	recs := []Record{{Measured: 90, Predicted: 100}, {Measured: 130, Predicted: 100}, {Measured: 100, Planned: 100}, {Measured: 50}}
	if ratio, n := Drift(recs); n != 3 || ratio != 1 {
		t.Errorf("drift %v over %d", ratio, n)
	}
	// A run too short to say anything is not recorded.
	r = start(t, m, o)
	greedy(t, r, "Once", 2)
	r.Close()
	if h2, _ := History(o.Store, m.Fingerprint); len(h2) != 1 {
		t.Errorf("%d records after a two-token run", len(h2))
	}
}
