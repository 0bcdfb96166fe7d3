package desktop

import (
	"context"
	"fmt"
	"image/color"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"dovetail/app/runner"
	"dovetail/app/runner/discover"
	"dovetail/app/runner/probe"
	"dovetail/app/runner/pull"
)

// getModels is the "Get models" page: a name to pull (an ollama name or a
// Hugging Face GGUF repository), a short list of small models with how
// each would fit this machine, the download's progress, and the models
// pulled so far. Cancel keeps the part downloaded: pulling the same name
// again goes on from there.
type getModels struct {
	a *App
	// onPulled is told of each model pulled (the wizard adds it to the
	// models it sets up).
	onPulled func(discover.Model)
	content  fyne.CanvasObject // not scrolled: the tab scrolls it, the wizard's step too

	name    *widget.Entry
	pull    *widget.Button
	cancel  *widget.Button
	use     *widget.Button
	offer   *widget.Button // the EAGLE draft of the model pulled last, where the catalogue lists one
	bar     *widget.ProgressBar
	status  *widget.Label
	pulled  *fyne.Container
	fits    []*widget.Label // beside catalog's models, in order
	machine *probe.Report   // read once, off the UI goroutine
	reading atomic.Bool     // the machine is being read; cleared last

	mu      sync.Mutex
	stop    context.CancelFunc // the pull under way (nil: none)
	last    discover.Model     // the model pulled last
	offered catalogDraft       // what offer pulls
	latest  atomic.Pointer[pull.Progress]
	queued  atomic.Bool                   // a progress update waits for the UI goroutine
	shown   atomic.Pointer[pull.Progress] // the step the page shows, once it shows it
}

// newGetModels is the page; machine is the machine as read already (the
// wizard's), or nil to read it off the UI goroutine.
func newGetModels(a *App, machine *probe.Report, onPulled func(discover.Model)) *getModels {
	g := &getModels{a: a, onPulled: onPulled, name: widget.NewEntry(), bar: widget.NewProgressBar(),
		status: widget.NewLabel(""), pulled: container.NewVBox()}
	g.name.SetPlaceHolder("A model's name: llama3.2:1b, or hf.co/ORG/REPO:Q4_K_M")
	g.name.OnSubmitted = func(string) { g.start() }
	g.pull = widget.NewButtonWithIcon("Pull", theme.DownloadIcon(), g.start)
	g.pull.Importance = widget.HighImportance
	g.cancel = widget.NewButtonWithIcon("Cancel", theme.CancelIcon(), g.stopPull)
	g.cancel.Disable()
	g.use = widget.NewButton("Chat with it", g.useLast)
	g.use.Hide()
	g.offer = widget.NewButtonWithIcon("", theme.DownloadIcon(), g.pullOffered)
	g.offer.Hide()
	g.status.Wrapping = fyne.TextWrapWord
	g.bar.Hide()
	top := container.NewVBox(
		widget.NewLabelWithStyle("Get models", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		widget.NewLabel("Name a model from ollama's library, a GGUF repository on Hugging Face or an EAGLE draft's, or pick one below."),
		container.NewBorder(nil, nil, nil, container.NewHBox(g.pull, g.cancel), g.name),
		g.bar, container.NewBorder(nil, nil, nil, container.NewHBox(g.offer, g.use), g.status))
	small, drafted := g.catalogRows()
	list := container.NewVBox(widget.NewLabelWithStyle("Small models that run well", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		small, widget.NewLabelWithStyle("Larger models with a trained EAGLE draft", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		drafted, widget.NewLabelWithStyle("Pulled", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}), g.pulled)
	g.content = container.NewVBox(top, list)
	g.showPulled()
	if machine != nil {
		g.showFits(*machine)
	} else {
		g.reading.Store(true)
		go g.readMachine()
	}
	return g
}

// catalogRows lists the catalogue, a row a model: name, what it is (cut
// to the room there is), its size, the fit (filled in once the machine is
// read), and a button that pulls it; a model with a published EAGLE draft
// has a second line that pulls the draft. Rows, not a grid: a grid's
// columns are all as wide as its widest cell, wider than a small window.
// The small models come first, those with a draft second.
func (g *getModels) catalogRows() (small, drafted *fyne.Container) {
	small, drafted = container.NewVBox(), container.NewVBox()
	for _, m := range catalog {
		fit := widget.NewLabel("…")
		g.fits = append(g.fits, fit)
		get := widget.NewButton("Get", func() {
			g.name.SetText(m.Name)
			g.start()
		})
		name := widget.NewLabel(m.Name)
		about := widget.NewLabel(m.About)
		about.Truncation = fyne.TextTruncateEllipsis
		row := container.NewBorder(nil, nil,
			container.NewGridWrap(fyne.NewSize(catalogNameWidth, name.MinSize().Height), name),
			container.NewHBox(widget.NewLabel("About "+runner.HumanBytes(m.Size)), fit, get), about)
		if m.Draft.Name == "" {
			small.Add(row)
			continue
		}
		drafted.Add(container.NewVBox(row, g.draftRow(m.Draft)))
	}
	return small, drafted
}

// draftRow is a catalogue model's second line: its draft, and a button
// that pulls it.
func (g *getModels) draftRow(d catalogDraft) fyne.CanvasObject {
	get := widget.NewButton(draftButtonText(d), func() {
		g.name.SetText(d.Name)
		g.start()
	})
	about := widget.NewLabel(d.About + ": it proposes tokens the model checks, for faster replies")
	about.Truncation = fyne.TextTruncateEllipsis
	// Under the model's description, not its name: the line is the
	// model's, not another model.
	indent := canvas.NewRectangle(color.Transparent)
	indent.SetMinSize(fyne.NewSize(catalogNameWidth, 0))
	return container.NewBorder(nil, nil, indent, get, about)
}

func draftButtonText(d catalogDraft) string {
	return "Get its EAGLE draft (" + runner.HumanBytes(d.Size) + ")"
}

// catalogNameWidth lines the catalogue's names up: the longest name's.
const catalogNameWidth = 130

// readMachine reads memory and GPUs (no measuring) and marks each
// catalogue model with the fit setup would find for it.
func (g *getModels) readMachine() {
	r := probe.Run(probe.Options{})
	fyne.Do(func() {
		g.showFits(r)
		g.reading.Store(false)
	})
}

// showFits marks each catalogue model with its fit on machine r.
func (g *getModels) showFits(r probe.Report) {
	g.machine = &r
	for i, m := range catalog {
		f := runner.FitBySize(m.Size, r)
		g.fits[i].SetText(fitWords(f.Verdict))
		g.fits[i].Importance = fitImportance(f.Verdict)
		g.fits[i].Refresh()
	}
}

// fitWords are a size fit's verdict as the page says it.
func fitWords(verdict string) string {
	switch verdict {
	case runner.FitsCPU:
		return "Fits in memory"
	case runner.FitsPartly:
		return "Layers on the GPU"
	}
	return "Too big for this machine"
}

func fitImportance(verdict string) widget.Importance {
	switch verdict {
	case runner.FitsCPU:
		return widget.SuccessImportance
	case runner.FitsPartly:
		return widget.WarningImportance
	}
	return widget.DangerImportance
}

// start pulls the name in the box, unless a pull is under way.
func (g *getModels) start() {
	name := strings.TrimSpace(g.name.Text)
	if name == "" {
		g.say("Name a model to pull, or press Get beside one of the list.", widget.DangerImportance)
		return
	}
	if _, err := pull.Parse(name); err != nil {
		g.say(err.Error(), widget.DangerImportance)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	g.mu.Lock()
	if g.stop != nil {
		g.mu.Unlock()
		stop()
		return
	}
	g.stop = stop
	g.mu.Unlock()
	g.pull.Disable()
	g.cancel.Enable()
	g.use.Hide()
	g.offer.Hide()
	g.bar.SetValue(0)
	g.bar.Show()
	g.say("Pulling "+name+"…", widget.MediumImportance)
	o := g.a.o.Pulls
	o.Progress = g.progress
	go func() {
		m, err := pull.Pull(ctx, name, o)
		fyne.Do(func() { g.finished(name, m, err, ctx.Err() != nil) })
	}()
}

// progress keeps the latest step and asks the UI goroutine to show it,
// once however many come in between.
func (g *getModels) progress(p pull.Progress) {
	g.latest.Store(&p)
	if g.queued.Swap(true) {
		return
	}
	fyne.Do(func() {
		g.queued.Store(false)
		g.showProgress(*g.latest.Load())
	})
}

func (g *getModels) showProgress(p pull.Progress) {
	if !g.busy() {
		return
	}
	defer g.shown.Store(&p)
	if p.Total > 0 {
		g.bar.SetValue(float64(p.Completed) / float64(p.Total))
		g.say(fmt.Sprintf("%s: %s of %s", p.Status, runner.HumanBytes(uint64(p.Completed)), runner.HumanBytes(uint64(p.Total))), widget.MediumImportance)
		return
	}
	g.say(p.Status, widget.MediumImportance)
}

// finished shows how a pull ended, on the UI goroutine. The pull stops
// being busy last, once the page shows the end (views flag the end of
// background work last: docs/DESIGN.md).
func (g *getModels) finished(name string, m pull.Model, err error, cancelled bool) {
	defer func() {
		g.mu.Lock()
		g.stop = nil
		g.mu.Unlock()
	}()
	g.pull.Enable()
	g.cancel.Disable()
	switch {
	case cancelled:
		g.say("Stopped. The part downloaded is kept: pull "+name+" again to go on from there.", widget.WarningImportance)
		return
	case err != nil:
		g.bar.Hide()
		g.say(pullError(err), widget.DangerImportance)
		return
	}
	g.bar.SetValue(1)
	if m.Draft != nil {
		g.say(fmt.Sprintf("Pulled the %s draft %s (%s) into %s.", kindWords(m.Draft.Kind), m.Name, runner.HumanBytes(uint64(m.Size)), m.Path), widget.SuccessImportance)
		g.showPulled()
		return
	}
	e := discover.Model{Name: m.Name, Path: m.Path, Source: "pulled", Size: m.Size}
	g.mu.Lock()
	g.last = e
	g.mu.Unlock()
	g.say(fmt.Sprintf("Pulled %s (%s).", m.Name, runner.HumanBytes(uint64(m.Size))), widget.SuccessImportance)
	g.use.Show()
	g.offerDraft(m.Name)
	g.a.findModels()
	g.a.chat.refreshPicker()
	g.showPulled()
	if g.onPulled != nil {
		g.onPulled(e)
	}
}

func (g *getModels) busy() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stop != nil
}

// stopPull cancels the pull under way; its part stays on disk.
func (g *getModels) stopPull() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stop != nil {
		g.stop()
	}
}

// offerDraft shows the button that pulls the EAGLE draft the catalogue
// lists for a model just pulled.
func (g *getModels) offerDraft(name string) {
	d, ok := draftFor(name)
	if !ok {
		return
	}
	g.mu.Lock()
	g.offered = d
	g.mu.Unlock()
	g.offer.SetText(draftButtonText(d))
	g.offer.Show()
}

// pullOffered pulls the draft offered, through the same pull as a model.
func (g *getModels) pullOffered() {
	g.mu.Lock()
	d := g.offered
	g.mu.Unlock()
	if d.Name == "" {
		return
	}
	g.name.SetText(d.Name)
	g.start()
}

// kindWords is a pulled draft's kind as the page says it.
func kindWords(kind string) string {
	if kind == "eagle3" {
		return "EAGLE-3"
	}
	return "EAGLE-1"
}

// useLast loads the model pulled last in the chat.
func (g *getModels) useLast() {
	g.mu.Lock()
	e := g.last
	g.mu.Unlock()
	if e.Path == "" {
		return
	}
	g.a.chat.loadModel(e.Path)
	if g.a.tabs != nil && len(g.a.tabs.Items) > 0 {
		g.a.tabs.SelectIndex(0)
	}
}

// showPulled lists the models and the EAGLE drafts pulled into the models
// folder.
func (g *getModels) showPulled() {
	ms, ds, err := pulledIn(g.a.o.Pulls.Dir)
	g.pulled.Objects = nil
	switch {
	case err != nil:
		g.pulled.Add(widget.NewLabel(pullError(err)))
	case len(ms) == 0 && len(ds) == 0:
		g.pulled.Add(widget.NewLabel("None yet."))
	}
	for _, m := range ms {
		g.pulled.Add(widget.NewLabel(fmt.Sprintf("%s  %s", m.Name, runner.HumanBytes(uint64(m.Size)))))
	}
	for _, d := range ds {
		g.pulled.Add(widget.NewLabel(fmt.Sprintf("%s draft %s  %s", kindWords(d.Kind), d.Name, runner.HumanBytes(uint64(d.Size)))))
	}
	g.pulled.Refresh()
}

func (g *getModels) say(text string, imp widget.Importance) {
	g.status.SetText(text)
	g.status.Importance = imp
	g.status.Refresh()
}

// pullError is an error's first line.
func pullError(err error) string {
	if err == nil {
		return ""
	}
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}

// offerModels is the wizard's offer when only the embedded model is
// there: the page, whose pulls join the models to set up.
func (w *wizard) offerModels() fyne.CanvasObject {
	g := newGetModels(w.a, w.machine, func(m discover.Model) {
		w.mu.Lock()
		w.chosen[len(w.found)] = true
		w.found = append(w.found, m)
		w.mu.Unlock()
		w.show(1)
	})
	w.get = g
	return container.NewVBox(widget.NewLabel("Only the embedded model is here, a tiny one that tells children's stories: get a model to chat with."), g.content)
}

// pulledIn lists the models and the EAGLE drafts pulled into dir (the
// user's models folder when "").
func pulledIn(dir string) ([]pull.Model, []pull.Draft, error) {
	if dir == "" {
		d, err := pull.Dir()
		if err != nil {
			return nil, nil, err
		}
		dir = d
	}
	ms, err := pull.List(dir)
	if err != nil {
		return nil, nil, err
	}
	ds, err := pull.Drafts(dir)
	return ms, ds, err
}

// tourShot shows the page, the catalogue's fits read, for the tour's
// screenshot.
func (g *getModels) tourShot(shot func(string) error) error {
	fyne.DoAndWait(func() { g.a.tabs.SelectIndex(len(g.a.tabs.Items) - 1) })
	read := func() (ok bool) {
		fyne.DoAndWait(func() { ok = g.machine != nil })
		return ok
	}
	for deadline := time.Now().Add(time.Minute); !read() && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
	}
	return shot("getmodels.png")
}
