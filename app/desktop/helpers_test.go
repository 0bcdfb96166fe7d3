package desktop

import (
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"dovetail/app/runner/discover"
	"dovetail/app/runner/probe"
	"dovetail/app/runner/store"
	"dovetail/app/server"
)

// newTestApp builds the app on fyne's test driver (no display) with a
// store of its own, no models but the embedded one, and a probe that
// measures nothing.
func newTestApp(t *testing.T, o Options) *App {
	t.Helper()
	fy := test.NewTempApp(t)
	if o.Store == nil {
		o.Store = store.At(t.TempDir())
	}
	if o.Places == nil {
		o.Places = &discover.Places{}
	}
	if o.Probe == nil {
		o.Probe = func(progress func(probe.Step)) probe.Report { return probe.Run(probe.Options{Progress: progress}) }
	}
	if o.StartAPI == nil {
		o.StartAPI = server.Start // as the desktop binary's main wires it
	}
	a, err := New(fy, o)
	if err == nil {
		// The Get models page reads the machine off the UI goroutine,
		// whose writes the test driver runs there: read it first.
		waitFor(t, "the Get models page's machine", func() bool { return !a.get.reading.Load() })
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// started starts a (setup skipped) and waits for its model.
func started(t *testing.T, o Options) *App {
	t.Helper()
	o.SkipSetup = true
	a := newTestApp(t, o)
	a.Start()
	waitLoaded(t, a)
	return a
}

// waitFor polls cond until it holds, failing the test after a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s never happened", what)
		}
	}
}

// waitLoaded waits for a model load to end, and fails the test unless a
// model is loaded.
func waitLoaded(t *testing.T, a *App) {
	t.Helper()
	waitFor(t, "the model's load", func() bool { return !a.chat.isLoading() })
	if r, _ := a.sess.loaded(); r == nil {
		t.Fatalf("no model loaded: %q", a.chat.problem.Text)
	}
}

// send types text in the message box, presses Enter, and waits for the
// reply to end.
func send(t *testing.T, a *App, text string) *Message {
	t.Helper()
	n := len(a.chat.conv.Messages)
	a.chat.input.SetText(text)
	a.chat.input.TypedKey(&fyne.KeyEvent{Name: fyne.KeyReturn})
	if len(a.chat.conv.Messages) != n+2 {
		t.Fatalf("Enter sent nothing; the problem line says %q", a.chat.problem.Text)
	}
	waitIdle(t, a)
	return &a.chat.conv.Messages[len(a.chat.conv.Messages)-1]
}

func waitIdle(t *testing.T, a *App) {
	t.Helper()
	waitFor(t, "the reply's end", func() bool { return !a.chat.isBusy() })
}

// greedy sets the sampling panel to greedy decoding.
func greedy(a *App) { a.chat.sampling["temperature"].SetText("0") }
