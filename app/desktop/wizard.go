package desktop

import (
	"fmt"
	"runtime/debug"
	"strings"
	"sync"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"dovetail/app/runner"
	"dovetail/app/runner/discover"
	"dovetail/app/runner/probe"
	"dovetail/internal/plural"
)

// wizard is the setup, the steps of `dovetail setup` as screens: what
// this machine has, the models found, their calibration, how each fits,
// and the predicted speed; confirming saves the settings.
type wizard struct {
	a       *App
	done    func()
	content *fyne.Container

	step     int
	title    *widget.Label
	body     *fyne.Container
	back     *widget.Button
	next     *widget.Button
	cancel   *widget.Button
	problem  *problemBox
	progress *widget.ProgressBar

	mu      sync.Mutex
	machine *probe.Report
	get     *getModels // the models step's page, offered with only the embedded model
	found   []discover.Model
	chosen  map[int]bool
	cals    map[string]*runner.Calibration // by path
	fits    []fitted
	working bool
}

// fitted is a chosen model's fit.
type fitted struct {
	entry       discover.Model
	fingerprint string
	fit         runner.Fit
	err         error
}

var wizardSteps = []string{"1. This machine", "2. Your models", "3. Calibration", "4. How they fit", "5. The speed to expect"}

func newWizard(a *App, done func()) *wizard {
	w := &wizard{a: a, done: done, title: widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}),
		body: container.NewVBox(), problem: newProblemBox(), progress: widget.NewProgressBar(),
		chosen: map[int]bool{}, cals: map[string]*runner.Calibration{}}
	w.progress.Hide()
	w.back = widget.NewButtonWithIcon("Back", theme.NavigateBackIcon(), func() { w.show(w.step - 1) })
	w.next = widget.NewButtonWithIcon("Next", theme.NavigateNextIcon(), w.forward)
	w.next.Importance = widget.HighImportance
	w.cancel = widget.NewButton("Skip: use the defaults", w.finish)
	buttons := container.NewHBox(w.cancel, layoutSpacer(), w.back, w.next)
	header := container.NewVBox(widget.NewLabelWithStyle("Setting up Dovetail", fyne.TextAlignLeading, fyne.TextStyle{Bold: true}), w.title)
	w.content = container.NewBorder(header, container.NewVBox(w.problem.content, w.progress, buttons), nil, nil, container.NewVScroll(w.body))
	return w
}

func layoutSpacer() fyne.CanvasObject { return layout.NewSpacer() }

func (w *wizard) start() { w.show(0) }

// show puts step i on screen and starts its work.
func (w *wizard) show(i int) {
	w.step = i
	w.title.SetText(wizardSteps[i])
	w.problem.hide()
	w.body.Objects = nil
	w.back.Disable()
	if i > 0 {
		w.back.Enable()
	}
	w.next.SetText("Next")
	// A step that works in the background starts it last: the UI is
	// not touched here once it runs.
	switch i {
	case 0:
		w.probeStep()
	case 1:
		w.modelsStep()
		w.body.Refresh()
	case 2:
		w.calibrationStep()
	case 3:
		w.fitStep()
	case 4:
		w.next.SetText("Save these settings")
		w.speedStep()
		w.body.Refresh()
	}
}

func (w *wizard) forward() {
	if w.busy() {
		return
	}
	if w.step == len(wizardSteps)-1 {
		w.save()
		return
	}
	if w.step == 1 && len(w.chosenModels()) == 0 {
		w.showProblem("Choose a model to set up.", nil)
		return
	}
	w.show(w.step + 1)
}

func (w *wizard) busy() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.working
}

// background runs work off the UI goroutine with Next held back; then
// shows what it did, or the problem says why it failed.
func (w *wizard) background(work func() error, then func()) {
	w.mu.Lock()
	w.working = true
	w.mu.Unlock()
	w.next.Disable()
	w.body.Refresh()
	go func() {
		err := work()
		// The models a step opened are closed: their memory goes back to
		// the system now, not after the chosen model has loaded beside it.
		debug.FreeOSMemory()
		fyne.Do(func() {
			w.next.Enable()
			if err != nil {
				w.showProblem(explain(err), err)
			} else {
				then()
			}
			w.body.Refresh()
			w.mu.Lock()
			w.working = false
			w.mu.Unlock()
		})
	}()
}

// showProblem says what went wrong in words, err's own text behind
// Details.
func (w *wizard) showProblem(words string, err error) {
	w.problem.show(words, err)
}

// probeStep checks the machine, each item ticked or said missing with
// what follows.
func (w *wizard) probeStep() {
	status := widget.NewLabel("Looking at this machine: the CPU and its kernels, the memory and its speed, the GPUs…")
	w.body.Add(status)
	w.progress.Show()
	w.progress.SetValue(0)
	w.background(func() error {
		r := w.a.o.Probe(func(s probe.Step) {
			fyne.Do(func() { showStep(status, w.progress, s) })
		})
		w.mu.Lock()
		w.machine = &r
		w.mu.Unlock()
		return nil
	}, func() {
		w.progress.Hide()
		w.body.Objects = nil
		for _, line := range checklist(*w.machine) {
			w.body.Add(line)
		}
	})
}

// showStep shows where the machine check stands: what it measures now,
// and the share of its steps done.
func showStep(status *widget.Label, bar *widget.ProgressBar, s probe.Step) {
	if s.Total > 0 {
		bar.SetValue(float64(s.Done) / float64(s.Total))
	}
	if s.What != "" {
		status.SetText(fmt.Sprintf("Measuring %s… (step %d of %d)", s.What, s.Done+1, s.Total))
	}
}

// checklist is the probe's report as ticks and warnings.
func checklist(r probe.Report) []fyne.CanvasObject {
	// Wrapped, so that a long line does not widen the window.
	line := func(icon fyne.Resource, text string) fyne.CanvasObject {
		l := widget.NewLabel(text)
		l.Wrapping = fyne.TextWrapWord
		return container.NewBorder(nil, nil, widget.NewIcon(icon), nil, l)
	}
	ok := func(text string) fyne.CanvasObject { return line(theme.ConfirmIcon(), text) }
	warn := func(text string) fyne.CanvasObject { return line(theme.WarningIcon(), text) }
	c := r.CPU
	out := []fyne.CanvasObject{
		ok(fmt.Sprintf("CPU: %s, %d cores, %d threads; the %s kernels run (%s)", c.Model, c.Cores, c.Threads, c.Kernels, strings.Join(c.ISA, " "))),
		ok(fmt.Sprintf("Memory: %s available of %s%s", runner.HumanBytes(r.Memory.AvailableBytes), runner.HumanBytes(r.Memory.TotalBytes),
			bandwidth(r.Memory.BandwidthGBs))),
	}
	for _, g := range r.GPUs {
		out = append(out, ok(fmt.Sprintf("GPU: %s, %s free of %s, PCIe gen %d x%d", g.Name, runner.HumanBytes(g.VRAMFreeBytes),
			runner.HumanBytes(g.VRAMTotalBytes), g.PCIeGen, g.PCIeWidth)))
	}
	for _, f := range r.Findings {
		out = append(out, warn(sentenceCase(f.String())))
	}
	return out
}

func bandwidth(gbs float64) string {
	if gbs <= 0 {
		return ""
	}
	return fmt.Sprintf(", %.1f GB/s", gbs)
}

// modelsStep lists the models found, to choose which to set up; a file or
// folder may be added.
func (w *wizard) modelsStep() {
	w.mu.Lock()
	if w.found == nil {
		w.found = w.a.modelList()
		w.chosen[w.startWith()] = true
	}
	found := append([]discover.Model(nil), w.found...)
	w.mu.Unlock()
	w.body.Add(widget.NewLabel("The models found: the embedded one, and those ollama and LM Studio keep."))
	for i, m := range found {
		check := widget.NewCheck(fmt.Sprintf("%s  [%s] %s", m.Name, m.Source, sizeOf(m)), func(on bool) {
			w.mu.Lock()
			w.chosen[i] = on
			w.mu.Unlock()
		})
		check.Checked = w.chosen[i]
		w.body.Add(check)
	}
	if len(found) == 1 { // only the embedded model: offer to get one
		w.body.Add(w.offerModels())
	}
	path := widget.NewEntry()
	path.SetPlaceHolder("A GGUF file or a folder of them")
	add := widget.NewButton("Add", func() {
		typed := strings.TrimSpace(path.Text)
		if typed == "" {
			w.showProblem("Type the path of a GGUF file, or of a folder of them, then press Add.", nil)
			return
		}
		ms, err := w.a.addModelPath(typed)
		if err != nil {
			w.showProblem(fmt.Sprintf("No models were added from %s: %s.", typed, explain(err)), err)
			return
		}
		w.mu.Lock()
		for _, m := range ms {
			w.chosen[len(w.found)] = true
			w.found = append(w.found, m)
		}
		w.mu.Unlock()
		w.show(1)
	})
	w.body.Add(container.NewBorder(nil, nil, nil, add, path))
}

// startWith is the model chosen to start with: the one the app was
// started with, else the embedded one.
func (w *wizard) startWith() int {
	for i, m := range w.found {
		if m.Path != "" && m.Path == w.a.o.Model {
			return i
		}
	}
	return 0
}

func sizeOf(m discover.Model) string {
	if m.Size <= 0 {
		return ""
	}
	return runner.HumanBytes(uint64(m.Size))
}

func (w *wizard) chosenModels() []discover.Model {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []discover.Model
	for i, m := range w.found {
		if w.chosen[i] {
			out = append(out, m)
		}
	}
	return out
}

// calibrationStep measures what predictions need, model by model, with
// progress.
func (w *wizard) calibrationStep() {
	models := w.chosenModels()
	status := widget.NewLabel("")
	w.body.Add(widget.NewLabel("Measuring what this machine does with each model: a decode step, verifying trees, a draft step."))
	w.body.Add(status)
	w.progress.Show()
	w.progress.SetValue(0)
	threads := max(1, w.machine.CPU.Cores)
	gpus := len(w.machine.GPUs) > 0
	w.background(func() error {
		for i, e := range models {
			m, err := runner.OpenModel(e.Path)
			if err != nil {
				return fmt.Errorf("%s: %v", e.Name, err)
			}
			cal, ok := runner.CachedCalibration(w.a.st, m, threads)
			if !ok {
				cal, err = runner.Calibrate(m, w.a.st, threads, gpus, func(s runner.Step) {
					fyne.Do(func() {
						status.SetText(fmt.Sprintf("%s: %s", e.Name, s.What))
						w.progress.SetValue((float64(i) + float64(s.Done)/float64(max(s.Total, 1))) / float64(len(models)))
					})
				})
			}
			m.Close()
			if err != nil {
				return fmt.Errorf("%s: %v", e.Name, err)
			}
			w.mu.Lock()
			w.cals[e.Path] = &cal
			w.mu.Unlock()
		}
		return nil
	}, func() {
		w.progress.SetValue(1)
		status.SetText("Calibrated " + plural.Of(len(models), "model"))
	})
}

// fitStep shows how each model fits: the verdict, the memory of each
// device by part, and the placement.
func (w *wizard) fitStep() {
	w.progress.Hide()
	models := w.chosenModels()
	w.background(func() error {
		var fits []fitted
		for _, e := range models {
			m, err := runner.OpenModel(e.Path)
			if err != nil {
				fits = append(fits, fitted{entry: e, err: err})
				continue
			}
			w.mu.Lock()
			cal := w.cals[e.Path]
			w.mu.Unlock()
			fits = append(fits, fitted{entry: e, fingerprint: m.Fingerprint, fit: runner.PlanFit(m, *w.machine, cal, w.a.st)})
			m.Close()
		}
		w.mu.Lock()
		w.fits = fits
		w.mu.Unlock()
		return nil
	}, func() {
		for _, f := range w.fits {
			w.body.Add(fitCard(f, *w.machine))
		}
	})
}

// fitCard draws one model's fit.
func fitCard(f fitted, machine probe.Report) fyne.CanvasObject {
	if f.err != nil {
		p := newProblemBox()
		p.show(explain(f.err), f.err)
		return widget.NewCard(f.entry.Name, "Cannot be opened", p.content)
	}
	fit, p := f.fit, f.fit.Placement
	verdict := widget.NewLabel(sentenceCase(fit.Verdict + ": " + fit.Reason))
	verdict.Wrapping = fyne.TextWrapWord
	box := container.NewVBox(verdict)
	var cpuParts, gpuParts []runner.Part
	for _, part := range fit.Budget.Parts {
		if part.Device == "cpu" {
			cpuParts = append(cpuParts, part)
		} else {
			gpuParts = append(gpuParts, part)
		}
	}
	box.Add(memoryBar("CPU memory", cpuParts, fit.Budget.Available))
	if len(machine.GPUs) > 0 {
		box.Add(memoryBar(machine.GPUs[0].Name, gpuParts, machine.GPUs[0].VRAMFreeBytes))
	}
	if fit.Verdict != runner.NoFit {
		layers := "all target layers on the CPU"
		if p.GPULayers > 0 {
			layers = plural.Of(p.GPULayers, "target layer") + " on the GPU"
		}
		l := widget.NewLabel(fmt.Sprintf("%s · %s · %s · %s · context %d · tree k %d, depth %d, γ %d",
			plural.Of(p.Threads, "CPU thread"), layers, placed("draft", p.DraftDevice), placed("trainer", p.TrainerDevice),
			p.Ctx, p.Tree.TopK, p.Tree.Depth, p.Tree.Tokens))
		l.Wrapping = fyne.TextWrapWord
		box.Add(l)
	}
	return widget.NewCard(f.entry.Name, "", box)
}

// speedStep shows the predicted speed of each model.
func (w *wizard) speedStep() {
	for _, f := range w.fits {
		if f.err != nil || f.fit.Verdict == runner.NoFit {
			continue
		}
		l := widget.NewLabel(sentenceCase(predictionText(f.fit.Predicted)))
		l.Wrapping = fyne.TextWrapWord
		w.body.Add(widget.NewCard(f.entry.Name, "", l))
	}
	w.body.Add(widget.NewLabel("The draft learns from what you ask: the speed grows with use."))
}

// save keeps the settings of the models that fit, and opens the first.
func (w *wizard) save() {
	chosen := map[string]runner.ModelSettings{}
	first, firstSet := "", false
	for _, f := range w.fits {
		if f.err == nil && f.fit.Verdict != runner.NoFit {
			chosen[f.fingerprint] = runner.SettingsFor(f.fit)
			if !firstSet {
				first, firstSet = f.entry.Path, true
			}
		}
	}
	if err := runner.SaveSettings(w.a.st, chosen); err != nil {
		w.showProblem("The settings are not saved: "+explain(err)+".", err)
		return
	}
	w.finish()
	if firstSet {
		w.a.chat.loadModel(first)
	}
}

// finish leaves the wizard. Skipped, it saves nothing: the defaults stand
// and the model loads.
func (w *wizard) finish() {
	step := w.step
	w.done()
	w.a.win.Canvas().Focus(w.a.chat.input)
	if step < len(wizardSteps)-1 {
		// An empty settings file: the next start does not ask again.
		if err := runner.SaveSettings(w.a.st, nil); err != nil {
			w.a.chat.showProblem(err)
		}
		w.a.chat.loadModel(w.a.currentPrefs().Model)
	}
}
