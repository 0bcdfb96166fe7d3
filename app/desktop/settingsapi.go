package desktop

import (
	"errors"
	"net"
	"strings"
)

// setServing starts or stops the API server as its box is ticked. A model
// loaded without a sequence for the API's requests loads again with one
// (a sequence is its own cache and threads, set when a model loads); once
// it has one, the server starts and stops at once.
func (s *settingsView) setServing(on bool) {
	if s.reverting {
		return
	}
	s.apiProblem.hide()
	addr := strings.TrimSpace(s.address.Text)
	if on {
		if err := checkAddress(addr); err != nil {
			s.untick()
			s.apiProblem.show(err.Error(), nil)
			return
		}
		if s.a.chat.isLoading() {
			s.untick()
			s.apiProblem.show("a model is loading: tick this again once it has loaded", nil)
			return
		}
	}
	p := s.a.currentPrefs()
	p.APIServer, p.APIAddress = on, addr
	if err := s.a.setPrefs(p); err != nil {
		s.apiProblem.show("The setting is not saved: "+explain(err), err)
	}
	if !on {
		s.a.sess.stopServing()
		s.refresh()
		return
	}
	r, _ := s.a.sess.loaded()
	switch {
	case r == nil:
		s.refresh() // the next load serves
	case r.Slots() >= 2:
		s.a.sess.serve(addr)
		s.refresh()
	default:
		s.apiStatus.SetText("Loading the model again with a sequence of its own for the API's requests…")
		s.a.chat.loadModel(p.Model)
	}
}

// moveServer keeps the address typed and, with the server on, starts it
// there at once.
func (s *settingsView) moveServer() {
	addr := strings.TrimSpace(s.address.Text)
	if err := checkAddress(addr); err != nil {
		s.apiProblem.show(err.Error(), nil)
		return
	}
	s.apiProblem.hide()
	p := s.a.currentPrefs()
	p.APIAddress = addr
	if err := s.a.setPrefs(p); err != nil {
		s.apiProblem.show("The address is not saved: "+explain(err), err)
		return
	}
	if r, _ := s.a.sess.loaded(); s.api.Checked && r != nil && r.Slots() >= 2 {
		s.a.sess.serve(addr)
	}
	s.refresh()
}

// untick sets the box back off without acting on it.
func (s *settingsView) untick() {
	s.reverting = true
	s.api.SetChecked(false)
	s.reverting = false
}

// checkAddress says what is wrong with an address to serve on.
func checkAddress(addr string) error {
	if addr == "" {
		return errors.New("the API server needs an address, such as 127.0.0.1:11435")
	}
	if _, port, err := net.SplitHostPort(addr); err != nil || port == "" {
		return errors.New("give the address as host:port, such as 127.0.0.1:11435, not " + addr)
	}
	return nil
}

// explainServe says why the server does not run, and what to do.
func explainServe(err error) string {
	if strings.Contains(err.Error(), "second sequence") {
		return "there is no room in memory for the API's own sequence beside the window's: lower the context under Running the model, then tick the box again"
	}
	return explain(err)
}
