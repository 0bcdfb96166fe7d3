package runner

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"dovetail/app/runner/probe"
	"dovetail/engine"
	"dovetail/engine/plan"
)

// Setup's prediction holds in the chat: a model calibrated, placed and
// predicted as setup does, then loaded with those settings and asked as
// the chat asks (its default sampling, text decoded as it streams),
// generates at a speed within 30% of the predicted range. The measured
// speed is the median of five replies, on the thread count calibration
// used. On a machine shared with other work the load can change between
// calibration and measurement; a pair that disagrees is tried again, up
// to three pairs: a prediction that is wrong disagrees every time.
func TestPredictionHoldsInChat(t *testing.T) {
	for _, name := range []string{"", "stories260K-f32.gguf"} {
		t.Run(name, func(t *testing.T) {
			m := open(t, name)
			var tries []string
			for range 3 {
				pr, got, speeds := predictThenMeasure(t, m)
				if lo, hi := 0.7*pr.Low, 1.3*pr.High; got >= lo && got <= hi {
					t.Logf("measured %.0f tokens/s (replies %.0f); predicted %.0f (%.0f–%.0f)", got, speeds, pr.WithDraft, pr.Low, pr.High)
					return
				}
				tries = append(tries, fmt.Sprintf("measured %.0f tokens/s (replies %.0f); predicted %.0f–%.0f, with 30%%: %.0f–%.0f",
					got, speeds, pr.Low, pr.High, 0.7*pr.Low, 1.3*pr.High))
			}
			t.Errorf("the prediction missed three times:\n%v", tries)
		})
	}
}

// predictThenMeasure calibrates m, predicts its speed as setup does, and
// measures it with the settings setup saves: the prediction, the median
// speed of five replies, and each reply's.
func predictThenMeasure(t *testing.T, m *Model) (Prediction, float64, []float64) {
	t.Helper()
	o := options(t)
	cal, err := Calibrate(m, o.Store, o.Threads, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	machine := probe.Report{}
	machine.CPU.Cores, machine.Memory.AvailableBytes = o.Threads, 8<<30
	f := PlanFit(m, machine, &cal, o.Store)
	pr := f.Predicted
	if pr.Low <= 0 || pr.Low > pr.WithDraft || pr.High < pr.WithDraft || pr.Low > pr.Plain {
		t.Fatalf("prediction %+v: no range around its speeds", pr)
	}
	SettingsFor(f).Apply(&o, func(string) bool { return false })
	r := start(t, m, o)
	defer r.Close()
	var speeds []float64
	for i := range 5 {
		sampler := calibrationSampler
		sampler.Seed = uint64(i + 1)
		res, err := r.Slot(0).GenerateText(context.Background(), TextRequest{Prompt: m.Tok.Encode("Once upon a time", true, false),
			MaxTokens: 200, Sampler: sampler, OnRound: func(engine.Round, []string) {}})
		if err != nil {
			t.Fatal(err)
		}
		speeds = append(speeds, res.Stats.GenTokensPerSec())
	}
	slices.Sort(speeds)
	return pr, speeds[len(speeds)/2], speeds
}

// A new draft has learnt nothing yet: setup predicts the target alone's
// speed for it (the planner keeps drafting off until it learns), and the
// range's high end is what learning may bring. The calibration is a 7B's
// on a desktop (a 50 ms step, verifying 16 nodes at 1.2 steps, a 2 ms
// draft step), where a draft accepting half its tokens would pay.
func TestNewDraftPredictsTargetAlone(t *testing.T) {
	m := open(t, "stories260K-f32.gguf")
	st := options(t).Store
	if savedDraftOf(m, st) != nil {
		t.Fatal("the test model has a saved draft")
	}
	step := 50 * time.Millisecond
	verify := map[int]time.Duration{}
	for n := 1; n <= 64; n++ {
		verify[n] = step + time.Duration(n)*step/80
	}
	cal := &Calibration{Threads: 8, Profile: plan.Profile{Decode: step, Verify: verify, DecodeTokensPerSec: 20},
		DraftStep: map[string]time.Duration{"cpu": 2 * time.Millisecond}, Plain: 19, PlainLow: 18, PlainHigh: 20}
	pr, _ := predict(cal, Placement{Threads: 8, DraftDevice: "cpu", TrainerDevice: "cpu", Device: "cpu"}, autoDraftOf(m, st), predictAsk{})
	if pr.WithDraft > 1.001*pr.Plain || pr.Tau > 1 || pr.High <= 1.2*pr.Plain {
		t.Errorf("a new draft predicted %.1f tokens/s (τ %.2f) against the target alone's %.1f, range %.1f–%.1f",
			pr.WithDraft, pr.Tau, pr.Plain, pr.Low, pr.High)
	}
}
