package desktop

import (
	"strings"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"

	"dovetail/app/runner/probe"
)

// The machine check's bar moves with the probe's steps done, no faster,
// and says what it measures now; at the end the checklist replaces it.
func TestWizardMachineCheckProgress(t *testing.T) {
	next := make(chan probe.Step)
	seen := make(chan struct{})
	a := newTestApp(t, Options{Probe: func(progress func(probe.Step)) probe.Report {
		for s := range next {
			progress(s)
			fyne.DoAndWait(func() {}) // the bar has been set once the UI ran this
			seen <- struct{}{}
		}
		return probe.Run(probe.Options{})
	}})
	a.Start()
	w := a.wizard
	status := w.body.Objects[0].(*widget.Label)
	for _, c := range []struct {
		step probe.Step
		bar  float64
		says string
	}{
		{probe.Step{What: "the memory bandwidth with 1 of 3 threads", Done: 0, Total: 4}, 0, "Measuring the memory bandwidth with 1 of 3 threads… (step 1 of 4)"},
		{probe.Step{What: "the memory bandwidth with 2 of 3 threads", Done: 1, Total: 4}, 0.25, "(step 2 of 4)"},
		{probe.Step{What: "the GPUs", Done: 3, Total: 4}, 0.75, "Measuring the GPUs…"},
		{probe.Step{Done: 4, Total: 4}, 1, "Measuring the GPUs…"},
	} {
		next <- c.step
		<-seen
		var bar float64
		var says string
		fyne.DoAndWait(func() { bar, says = w.progress.Value, status.Text })
		if bar != c.bar || !strings.Contains(says, c.says) {
			t.Errorf("after %+v: bar %.2f, status %q; want %.2f, %q", c.step, bar, says, c.bar, c.says)
		}
	}
	close(next)
	w.settle(t)
	if !w.progress.Hidden || !showing(w.body, "CPU: ") {
		t.Errorf("after the check: bar shown %v, body %q", !w.progress.Hidden, texts(w.body))
	}
}
