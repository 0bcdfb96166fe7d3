package desktop

import (
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"dovetail/app/runner"
	"dovetail/app/runner/store"
)

// learnView is speed and learning: τ and tokens/s over the requests with
// the draft's versions marked, the trainer's state, the text memory, and
// the saved drafts with a rollback.
type learnView struct {
	a       *App
	content fyne.CanvasObject

	tau, speed *lineChart
	trainer    *widget.Label
	pause      *widget.Button
	memory     *widget.Label
	clear      *widget.Button
	memOff     *widget.Check
	drafts     *widget.Label
	rollback   *widget.Button
	problem    *widget.Label
}

func newLearnView(a *App) *learnView {
	l := &learnView{a: a, tau: newLineChart("τ, tokens per round"), speed: newLineChart("Tokens/s"),
		trainer: widget.NewLabel("No model loaded"), memory: widget.NewLabel(""), drafts: widget.NewLabel(""),
		problem: widget.NewLabel("")}
	l.trainer.Wrapping = fyne.TextWrapWord
	l.drafts.Wrapping = fyne.TextWrapWord
	l.problem.Importance = widget.DangerImportance
	l.problem.Hide()
	l.pause = widget.NewButton("Pause learning", l.togglePause)
	l.clear = widget.NewButton("Clear the text memory", l.clearMemory)
	l.memOff = widget.NewCheck("Text memory off", l.setMemoryOff)
	l.memOff.Checked = a.currentPrefs().MemoryOff
	l.rollback = widget.NewButton("Roll back to the previous draft", l.rollBack)
	charts := container.NewGridWithColumns(2, l.tau, l.speed)
	l.content = container.NewVScroll(container.NewVBox(
		charts,
		widget.NewLabel("Orange lines: a new draft version took over."),
		widget.NewCard("Trainer", "", container.NewVBox(l.trainer, l.pause)),
		widget.NewCard("Text memory", "Verified text whose continuations every draft tree proposes",
			container.NewVBox(l.memory, container.NewHBox(l.clear, l.memOff))),
		widget.NewCard("Saved drafts", "", container.NewVBox(l.drafts, l.rollback)),
		l.problem))
	return l
}

// refresh shows the charts and the state as they are now.
func (l *learnView) refresh() {
	h := l.a.sess.history()
	l.tau.set(series(h, func(s requestStat) (float64, bool) { return s.Tau, s.Tau > 0 }))
	l.speed.set(series(h, func(s requestStat) (float64, bool) { return s.TokensPerSec, true }))
	r, m := l.a.sess.loaded()
	if r == nil {
		l.trainer.SetText("No model loaded")
		return
	}
	st, ok := r.Adaptation()
	if !ok {
		l.trainer.SetText(sentenceCase(draftWords(r.Draft())) + " does not adapt.")
		l.pause.Disable()
	} else {
		l.pause.Enable()
		l.pause.SetText("Pause learning")
		if st.Paused {
			l.pause.SetText("Resume learning")
		}
		l.trainer.SetText(fmt.Sprintf("%s. Kept version %d after %s, %d published; %s held for training; τ now %.2f (long-run %.2f).",
			sentenceCase(trainerState(r)), st.Version, plural(st.Runs, "training run"), st.Published, plural(st.Records, "position"), st.ShortTau, st.LongTau))
		l.memory.SetText(plural(st.Remembered, "token") + " remembered")
	}
	if !ok {
		l.memory.SetText("No text memory: the draft does not adapt")
	}
	l.showDrafts(m)
}

// series is the value of each request that has one (τ: those that
// drafted), and the points where the draft's version changed.
func series(h []requestStat, value func(requestStat) (float64, bool)) (vals []float64, markers []int) {
	last := -1
	for _, s := range h {
		v, ok := value(s)
		if !ok {
			continue
		}
		if last >= 0 && s.DraftVersion != last {
			markers = append(markers, len(vals))
		}
		vals, last = append(vals, v), s.DraftVersion
	}
	return vals, markers
}

// showDrafts lists the saved drafts, the loaded model's first.
func (l *learnView) showDrafts(m *runner.Model) {
	ds, err := l.a.st.Drafts()
	if err != nil {
		l.drafts.SetText(err.Error())
		return
	}
	var lines []string
	prev := false
	for _, d := range ds {
		mark := ""
		if d.Fingerprint == m.Fingerprint {
			mark, prev = " (this model)", d.Prev
		}
		if d.Err != nil {
			lines = append(lines, fmt.Sprintf("%s: unreadable: %v", d.Fingerprint, d.Err))
			continue
		}
		lines = append(lines, fmt.Sprintf("%s%s: version %s, τ history %s, memory %s", orNone(d.Target), mark, orNone(d.Version),
			orNone(store.FormatFloats(d.TauHistory)), runner.HumanBytes(uint64(d.Memory))))
	}
	if len(lines) == 0 {
		lines = []string{"None yet: drafts are saved as they adapt"}
	}
	l.drafts.SetText(strings.Join(lines, "\n"))
	if prev {
		l.rollback.Enable()
	} else {
		l.rollback.Disable()
	}
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (l *learnView) togglePause() {
	r, _ := l.a.sess.loaded()
	if r == nil {
		return
	}
	st, _ := r.Adaptation()
	r.PauseLearning(!st.Paused)
	l.refresh()
}

func (l *learnView) clearMemory() {
	r, _ := l.a.sess.loaded()
	if r == nil {
		return
	}
	if err := r.ClearMemory(); err != nil {
		l.showProblem(err)
	}
	l.refresh()
}

// setMemoryOff turns the text memory off or on: the model loads again.
func (l *learnView) setMemoryOff(off bool) {
	p := l.a.currentPrefs()
	if p.MemoryOff == off {
		return
	}
	p.MemoryOff = off
	l.a.setPrefs(p)
	l.a.chat.loadModel(p.Model)
}

// rollBack makes the draft the last save replaced the model's again, and
// loads the model with it, in the background. The running draft is saved
// first (at its close), so that the rollback is not saved over.
func (l *learnView) rollBack() {
	_, m := l.a.sess.loaded()
	if m == nil {
		return
	}
	fp := m.Fingerprint
	l.a.chat.reload(l.a.currentPrefs().Model, func() error { return l.a.st.Restore(fp) })
}

func (l *learnView) showProblem(err error) {
	l.problem.SetText(err.Error())
	l.problem.Show()
}
