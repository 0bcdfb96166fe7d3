package desktop

import (
	"fmt"
	"strings"

	"dovetail/app/runner"

	"fyne.io/fyne/v2"
)

// lastSpeed is the last reply's tokens and speed as its line shows them,
// for the tour's report on stderr: what a window's chat measures.
func (c *chatView) lastSpeed() string {
	var st *MsgStats
	fyne.DoAndWait(func() {
		if n := len(c.conv.Messages); n > 0 {
			st = c.conv.Messages[n-1].Stats
		}
	})
	if st == nil {
		return "no stats"
	}
	return fmt.Sprintf("%d tokens at %s tokens/s", st.Tokens, formatRate(st.TokensPerSec))
}

// predictions are setup's predicted speeds, model by model, for the
// tour's report on stderr.
func (w *wizard) predictions() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var parts []string
	for _, f := range w.fits {
		if f.err == nil && f.fit.Verdict != runner.NoFit {
			parts = append(parts, f.entry.Name+": "+predictionText(f.fit.Predicted))
		}
	}
	return strings.Join(parts, "; ")
}
