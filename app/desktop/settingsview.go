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
)

// settingsView holds the local API server, the threads and context, where
// the data lives, and a check that speculation changes nothing.
type settingsView struct {
	a       *App
	content fyne.CanvasObject

	api       *widget.Check
	address   *widget.Entry
	apiStatus *widget.Label
	threads   *widget.Entry
	ctx       *widget.Entry
	layers    *widget.Entry
	apply     *widget.Button
	problem   *widget.Label
	places    *widget.Label
	prompt    *widget.Entry
	check     *widget.Button
	result    *widget.Label

	mu       sync.Mutex
	checking bool
}

func newSettingsView(a *App) *settingsView {
	s := &settingsView{a: a, api: widget.NewCheck("Serve the API (OpenAI's and ollama's) from this app", nil),
		address: widget.NewEntry(), apiStatus: widget.NewLabel(""), threads: widget.NewEntry(), ctx: widget.NewEntry(), layers: widget.NewEntry(),
		problem: widget.NewLabel(""), places: widget.NewLabel(""), prompt: widget.NewEntry(), result: widget.NewLabel("")}
	s.problem.Importance = widget.DangerImportance
	s.problem.Hide()
	s.result.Wrapping = fyne.TextWrapWord
	s.apiStatus.Wrapping = fyne.TextWrapWord
	p := a.currentPrefs()
	s.api.Checked = p.APIServer
	s.address.SetText(p.APIAddress)
	s.threads.SetPlaceHolder(fmt.Sprintf("from the model's settings (this machine: %d)", runtime.NumCPU()))
	s.ctx.SetPlaceHolder("from the model's settings")
	if p.Threads > 0 {
		s.threads.SetText(strconv.Itoa(p.Threads))
	}
	if p.Ctx > 0 {
		s.ctx.SetText(strconv.Itoa(p.Ctx))
	}
	s.layers.SetPlaceHolder("from the model's settings: auto (as many as fit beside the draft), 0 or a number")
	s.layers.SetText(p.GPULayers)
	s.apply = widget.NewButton("Apply (loads the model again)", s.applyChanges)
	s.prompt.SetText("Once upon a time")
	s.check = widget.NewButton("Check that speculative output equals the target alone", s.checkLossless)
	st := a.st
	s.places.SetText(fmt.Sprintf("Drafts and text memories: %s\nConversations: %s\nModel settings: %s\nThese settings: %s",
		st.DraftsDir(), st.ConversationsDir(), st.SettingsPath(), st.AppSettingsPath()))
	s.places.Wrapping = fyne.TextWrapWord
	s.content = container.NewVScroll(container.NewVBox(
		widget.NewCard("Local API server", "the same server as dovetail serve, on this machine only unless the address says otherwise",
			container.NewVBox(s.api, widget.NewForm(widget.NewFormItem("Address", s.address)), s.apiStatus)),
		widget.NewCard("Running the model", "", widget.NewForm(
			widget.NewFormItem("CPU threads", s.threads), widget.NewFormItem("Context (tokens)", s.ctx),
			widget.NewFormItem("Target layers on the GPU", s.layers))),
		s.apply, s.problem,
		widget.NewCard("Where your data lives", "", s.places),
		widget.NewCard("Lossless speculation", "greedy decoding with the draft and without must give the same text",
			container.NewVBox(s.prompt, s.check, s.result)),
		a.themeSetting()))
	return s
}

// refresh says whether the API server runs.
func (s *settingsView) refresh() {
	addr, err := s.a.sess.serving()
	switch {
	case addr != "":
		s.apiStatus.SetText("serving on http://" + addr + " (/v1 and /api)")
	case err != nil:
		s.apiStatus.SetText("not serving: " + err.Error())
	default:
		s.apiStatus.SetText("off")
	}
}

// values are the form's settings, or what is wrong with them.
func (s *settingsView) values() (Prefs, error) {
	p := s.a.currentPrefs()
	p.APIServer, p.APIAddress = s.api.Checked, strings.TrimSpace(s.address.Text)
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
	if p.Threads, err = num(s.threads, "threads", runtime.NumCPU()); err != nil {
		return p, err
	}
	if p.Ctx, err = num(s.ctx, "the context", 1<<20); err != nil {
		return p, err
	}
	if p.GPULayers = strings.TrimSpace(s.layers.Text); p.GPULayers != "" {
		if _, err := runner.ParseGPULayers(p.GPULayers); err != nil {
			return p, fmt.Errorf("target layers on the GPU: want auto, 0 or a number of layers, not %q", p.GPULayers)
		}
	}
	if p.APIServer && p.APIAddress == "" {
		return p, fmt.Errorf("the API server needs an address, such as 127.0.0.1:11435")
	}
	return p, nil
}

// applyChanges saves the settings and loads the model again with them.
func (s *settingsView) applyChanges() {
	p, err := s.values()
	if err != nil {
		s.problem.SetText(err.Error())
		s.problem.Show()
		return
	}
	s.problem.Hide()
	if err := s.a.setPrefs(p); err != nil {
		s.problem.SetText("not saved: " + err.Error())
		s.problem.Show()
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
	s.result.SetText("generating with the draft and without…")
	prompt := s.prompt.Text
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c, err := s.a.sess.checkLossless(ctx, prompt, 64)
		fyne.Do(func() {
			s.check.Enable()
			switch {
			case err != nil:
				s.result.SetText("the check did not run: " + err.Error())
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
