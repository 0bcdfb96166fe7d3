package runner

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"dovetail/app/runner/probe"
	"dovetail/engine"
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
