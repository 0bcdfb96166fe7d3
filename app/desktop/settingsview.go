package desktop

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"dovetail/app/runner"
	"dovetail/internal/plural"
)

// settingsView holds the local API server, the threads and context, where
// the data lives, and a check that speculation changes nothing. Each
// setting takes effect when changed, or beside a button that says what
// applying it does.
type settingsView struct {
	a       *App
	content fyne.CanvasObject

	api        *widget.Check
	address    *widget.Entry
	useAddress *widget.Button
	apiStatus  *widget.Label
	apiProblem *problemBox
	reverting  bool // the check is set back: its OnChanged does nothing
	threads    *widget.Entry
	ctx        *widget.Entry
	layers     *widget.Entry
	apply      *widget.Button
	problem    *problemBox
	places     *widget.Label
	prompt     *widget.Entry
	check      *widget.Button
	result     *widget.Label

	mu       sync.Mutex
	checking bool
}

func newSettingsView(a *App) *settingsView {
	s := &settingsView{a: a, api: widget.NewCheck("Serve the API (OpenAI's and ollama's) from this app", nil),
		address: widget.NewEntry(), apiStatus: widget.NewLabel(""), apiProblem: newProblemBox(), threads: widget.NewEntry(),
		ctx: widget.NewEntry(), layers: widget.NewEntry(), problem: newProblemBox(), places: widget.NewLabel(""),
		prompt: widget.NewEntry(), result: widget.NewLabel("")}
	s.result.Wrapping = fyne.TextWrapWord
	s.apiStatus.Wrapping = fyne.TextWrapWord
	p := a.currentPrefs()
	s.api.Checked = p.APIServer
	s.api.OnChanged = s.setServing // after Checked: loading the preference starts nothing
	s.address.SetText(p.APIAddress)
	s.address.OnSubmitted = func(string) { s.moveServer() }
	s.useAddress = widget.NewButton("Use this address", s.moveServer)
	s.threads.SetPlaceHolder(fmt.Sprintf("From the model's settings (this machine: %s)", plural.Of(runtime.NumCPU(), "thread")))
	s.ctx.SetPlaceHolder("From the model's settings")
	if p.Threads > 0 {
		s.threads.SetText(strconv.Itoa(p.Threads))
	}
	if p.Ctx > 0 {
		s.ctx.SetText(strconv.Itoa(p.Ctx))
	}
	s.layers.SetPlaceHolder("From the model's settings: auto (as many as fit beside the draft), 0 or a number")
	s.layers.SetText(p.GPULayers)
	s.apply = widget.NewButton("Load the model again with these settings", s.applyChanges)
	s.apply.Importance = widget.HighImportance
	s.prompt.SetText("Once upon a time")
	s.check = widget.NewButton("Check that speculative output equals the target alone", s.checkLossless)
	st := a.st
	s.places.SetText(fmt.Sprintf("Drafts and text memories: %s\nConversations: %s\nModel settings: %s\nThese settings: %s",
		st.DraftsDir(), st.ConversationsDir(), st.SettingsPath(), st.AppSettingsPath()))
	s.places.Wrapping = fyne.TextWrapWord
	s.content = container.NewVScroll(container.NewVBox(
		noteCard("Local API server", "The same server as dovetail serve, on this machine only unless the address says otherwise; it starts and stops as you tick the box",
			container.NewVBox(s.api, widget.NewForm(widget.NewFormItem("Address", container.NewBorder(nil, nil, nil, s.useAddress, s.address))),
				s.apiStatus, s.apiProblem.content)),
		noteCard("Running the model", "These take effect when the model loads: the button below loads it again with them",
			container.NewVBox(widget.NewForm(
				widget.NewFormItem("CPU threads", s.threads), widget.NewFormItem("Context (tokens)", s.ctx),
				widget.NewFormItem("Target layers on the GPU", s.layers)),
				s.problem.content, container.NewHBox(s.apply))),
		widget.NewCard("Where your data lives", "", s.places),
		noteCard("Lossless speculation", "Greedy decoding with the draft and without must give the same text",
			container.NewVBox(s.prompt, s.check, s.result)),
		a.themeSetting()))
	return s
}

// refresh says whether the API server runs, and if it should but does
// not, why.
func (s *settingsView) refresh() {
	addr, err := s.a.sess.serving()
	switch {
	case addr != "":
		s.apiStatus.SetText("Serving on http://" + addr + " (/v1 and /api)")
		s.apiProblem.hide()
	case err != nil:
		s.apiStatus.SetText("Not serving.")
		s.apiProblem.show(explainServe(err), err)
	case s.api.Checked:
		s.apiStatus.SetText("Starts when a model has loaded.")
	default:
		s.apiStatus.SetText("Off.")
	}
}

// values are the form's settings for running the model, or what is wrong
// with them.
func (s *settingsView) values() (Prefs, error) {
	p := s.a.currentPrefs()
	num := func(e *widget.Entry, what string, hi int) (int, error) {
		t := strings.TrimSpace(e.Text)
		if t == "" {
			return 0, nil
		}
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 || n > hi {
			return 0, fmt.Errorf("%s must be a whole number from 1 to %d, not %q", what, hi, t)
		}
		return n, nil
	}
	var err error
	if p.Threads, err = num(s.threads, "CPU threads", runtime.NumCPU()); err != nil {
		return p, err
	}
	if p.Ctx, err = num(s.ctx, "The context", 1<<20); err != nil {
		return p, err
	}
	if p.GPULayers = strings.TrimSpace(s.layers.Text); p.GPULayers != "" {
		if _, err := runner.ParseGPULayers(p.GPULayers); err != nil {
			return p, fmt.Errorf("target layers on the GPU: want auto, 0 or a number of layers, not %q", p.GPULayers)
		}
	}
	return p, nil
}

// applyChanges saves the settings and loads the model again with them.
func (s *settingsView) applyChanges() {
	p, err := s.values()
	if err != nil {
		s.problem.show(err.Error(), nil)
		return
	}
	s.problem.hide()
	if err := s.a.setPrefs(p); err != nil {
		s.problem.show("The settings are not saved: "+explain(err), err)
		return
	}
	s.a.chat.loadModel(p.Model)
}

// checkLossless runs the check in the background.
func (s *settingsView) checkLossless() {
	s.mu.Lock()
	s.checking = true
	s.mu.Unlock()
	s.check.Disable()
	s.result.SetText("Generating with the draft and without…")
	prompt := s.prompt.Text
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c, err := s.a.sess.checkLossless(ctx, prompt, 64)
		fyne.Do(func() {
			s.check.Enable()
			switch {
			case err != nil:
				s.result.SetText("The check did not run: " + explain(err))
			case c.same:
				s.result.SetText(fmt.Sprintf("The same text, token for token, over %d speculative rounds (τ %.2f): %s", c.rounds, c.tau, c.spec))
			default:
				s.result.SetText("DIFFERENT.\nWith the draft: " + c.spec + "\nThe target alone: " + c.plain)
			}
			s.mu.Lock()
			s.checking = false
			s.mu.Unlock()
		})
	}()
}

// isChecking reports a lossless check under way.
func (s *settingsView) isChecking() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checking
}
