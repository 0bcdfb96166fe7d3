package train

import (
	"fmt"
	"testing"

	"dovetail/device"
	"dovetail/dgf"
	"dovetail/internal/golden"
	"dovetail/models"
	"dovetail/models/draft"
)

// Measure counts, to the byte, what the host devices hold for a draft
// drafting in two sequences and a learner that published once: on models
// whose frozen matrices the host keeps as they are (f32) and dequantizes
// (Q8_0, small), and with the draft's matrices counted as large ones
// (quantized for drafting, their float32 values dropped).
func TestMeasureMatchesHost(t *testing.T) {
	for _, large := range []bool{false, true} {
		t.Run(fmt.Sprint("large=", large), func(t *testing.T) {
			hc := device.HostConfig{Threads: 1}
			if large {
				hc.Float32Upto = 1024
			}
			measureMatchesHost(t, hc)
		})
	}
}

func measureMatchesHost(t *testing.T, hc device.HostConfig) {
	for _, name := range []string{"stories260K-f32.gguf", "stories260K-Q8_0-mixed.gguf"} {
		m, err := models.LoadLlama(golden.ModelPath(name))
		if err != nil {
			t.Fatal(err)
		}
		c := draft.ForTarget(m.Config, 2, 0)
		learn := &Learn{Config: DefaultTrainConfig(), MaxRows: 96, MaxLen: 48, EvalDepth: 4}
		want, err := Measure(c, m, 100, 2, learn, device.NewHostCounter(hc), device.NewHostCounter(hc))
		if err != nil {
			t.Fatal(err)
		}
		dd, td := device.NewHostWith(hc), device.NewHostWith(hc)
		d, err := dgf.NewDraft(dd, c, m)
		if err != nil {
			t.Fatal(err)
		}
		d.InitDayZero(1)
		if err := d.FreezeForDrafting(); err != nil {
			t.Fatal(err)
		}
		live := dgf.NewLive(d, 0)
		s1, s2 := live.NewSequence(100), live.NewSequence(100)
		live.DropFloat()
		lr := NewLearner(live, td, learn.Config, learn.MaxRows, learn.MaxLen, learn.EvalDepth)
		// Nothing is on the training device before the learner is used.
		if device.Held(td) != 0 || lr.SetUp() {
			t.Errorf("%s: a learner not yet used holds %d bytes (set up: %v)", name, device.Held(td), lr.SetUp())
		}
		if _, err := lr.Publish(true); err != nil {
			t.Fatal(err)
		}
		if device.Held(dd) != want.Draft || device.Held(td) != want.Trainer {
			t.Errorf("%s: held %d and %d bytes, measured %d and %d", name, device.Held(dd), device.Held(td), want.Draft, want.Trainer)
		}
		if want.Draft == 0 || want.Trainer <= want.Draft/2 {
			t.Errorf("%s: implausible footprint %+v", name, want)
		}
		s1.Free()
		s2.Free()
		lr.Free()
		live.Close()
		m.Close()
	}
}
