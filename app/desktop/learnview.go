package desktop

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"dovetail/app/runner"
	"dovetail/app/runner/store"
	"dovetail/internal/plural"
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
	// rollbackWay is how Roll back returns to the previous draft.
	rollbackWay rollBack
	problem     *widget.Label
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
	l.clear = widget.NewButton("Clear the text memory", l.confirmClear)
	l.memOff = widget.NewCheck("Text memory off", l.setMemoryOff)
	l.memOff.Checked = a.currentPrefs().MemoryOff
	l.rollback = widget.NewButton("Roll back to the previous draft", l.rollBack)
	charts := container.NewGridWithColumns(2, l.tau, l.speed)
	l.content = container.NewVScroll(container.NewVBox(
		charts,
		wrapped("Each point is a reply with this model; an orange line marks the reply where a newly published draft version took over."),
		widget.NewCard("Trainer", "", container.NewVBox(l.trainer, l.pause)),
		noteCard("Text memory", "Verified text whose continuations every draft tree proposes",
			container.NewVBox(l.memory, container.NewHBox(l.clear, l.memOff))),
		widget.NewCard("Saved drafts", "", container.NewVBox(l.drafts, l.rollback)),
		l.problem))
	return l
}

// refresh shows the charts and the state as they are now.
func (l *learnView) refresh() {
	h, herr := l.a.sess.history()
	l.showCharts(h, herr)
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
		l.trainer.SetText(fmt.Sprintf("%s. Kept version %d after %s, %d published since the model loaded; %s held for training; %s.",
			sentenceCase(trainerState(r)), st.Version, plural.Of(st.Runs, "training run"), st.Published, plural.Of(st.Records, "position"), tauNow(st.ShortTau, st.LongTau)))
		l.memory.SetText(plural.Of(st.Remembered, "token") + " remembered")
	}
	if !ok {
		l.memory.SetText("No text memory: the draft does not adapt")
	}
	l.showDrafts(r, m)
}

// tauNow is the trainer's measured τ in words: none before a round ran
// since the model loaded (a restart starts the averages again).
func tauNow(short, long float64) string {
	if short <= 0 {
		return "τ not measured yet since the model loaded"
	}
	return fmt.Sprintf("τ now %.2f (long-run %.2f)", short, long)
}

// showCharts charts the model's replies: tokens/s of each, τ of those
// that drafted, over one count of replies, with the versions marked.
func (l *learnView) showCharts(h []requestStat, herr error) {
	empty := "No replies yet with this model: the charts fill as you chat."
	if herr != nil {
		empty = herr.Error()
	}
	speed, tau, marks := chartSeries(h)
	speedSum, tauSum := "", ""
	if n := len(h); n > 0 {
		speedSum = fmt.Sprintf("last %s · %s", formatRate(h[n-1].TokensPerSec), plural.Of(n, "reply"))
		drafted := 0
		for _, v := range tau {
			if !math.IsNaN(v) {
				drafted++
			}
		}
		tauSum = fmt.Sprintf("%d of %s with draft rounds", drafted, plural.Of(n, "reply"))
		if drafted == 0 {
			empty = fmt.Sprintf("None of the %s had draft rounds: speculation was off (the target alone was faster).", plural.Of(n, "reply"))
		}
	}
	l.speed.set(speed, marks, speedSum, empty)
	l.tau.set(tau, marks, tauSum, empty)
}

// chartSeries are the charts' values over the replies: tokens/s, and τ
// (NaN for a reply that drafted nothing), and a marker at each reply
// where the trainer's version changed, named by the version.
func chartSeries(h []requestStat) (speed, tau []float64, marks []marker) {
	for i, s := range h {
		speed = append(speed, s.TokensPerSec)
		t := math.NaN()
		if s.Tau > 0 && (s.Rounds > 0 || s.Tau > 1) {
			t = s.Tau
		}
		tau = append(tau, t)
		if i > 0 && s.DraftVersion != h[i-1].DraftVersion {
			marks = append(marks, marker{at: i, label: fmt.Sprintf("v%d", s.DraftVersion)})
		}
	}
	return speed, tau, marks
}

// showDrafts lists the saved drafts, the loaded model's first, with the
// version running beside the one saved.
func (l *learnView) showDrafts(r *runner.Runner, m *runner.Model) {
	ds, err := l.a.st.Drafts()
	if err != nil {
		l.drafts.SetText(err.Error())
		return
	}
	ad, adapting := r.Adaptation()
	var lines []string
	listed := false
	// The previous draft may be kept alone, after a rollback to the
	// shipped one: the listing shows none, yet it is there to return to.
	_, err = os.Stat(l.a.st.PrevPath(m.Fingerprint))
	prev := err == nil
	for _, d := range ds {
		mark := ""
		if d.Fingerprint == m.Fingerprint {
			mark, listed = " (this model)", true
		}
		if d.Err != nil {
			lines = append(lines, fmt.Sprintf("%s: unreadable: %v", d.Fingerprint, d.Err))
			continue
		}
		line := fmt.Sprintf("%s%s: version %s, τ history %s, memory %s", orNone(d.Target), mark, orNone(d.Version),
			orNone(store.FormatFloats(d.TauHistory)), runner.HumanBytes(uint64(d.Memory)))
		if mark != "" && adapting && strconv.Itoa(ad.Version) != d.Version {
			line += fmt.Sprintf("; version %d running, saved when the model closes", ad.Version)
		}
		lines = append(lines, line)
	}
	if !listed && adapting && ad.Published > 0 {
		lines = append([]string{fmt.Sprintf("%s (this model): version %d running, saved when the model closes", m.Name, ad.Version)}, lines...)
	}
	if len(lines) == 0 {
		lines = []string{"None yet: drafts are saved as they adapt"}
	}
	l.drafts.SetText(strings.Join(lines, "\n"))
	l.rollbackWay = rollBackWay(prev, adapting && ad.Published > 0, startedFrom(r.Draft().Name, l.a.st.DraftPath(m.Fingerprint)))
	if l.rollbackWay != noRollBack {
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
	fp, way := m.Fingerprint, l.rollbackWay
	l.a.chat.reload(l.a.currentPrefs().Model, func() error {
		if way == shelveDraft {
			return l.a.st.Shelve(fp)
		}
		return l.a.st.Restore(fp)
	})
}

func (l *learnView) showProblem(err error) {
	l.problem.SetText(err.Error())
	l.problem.Show()
}
