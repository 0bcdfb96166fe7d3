package desktop

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"

	"dovetail/app/runner/store"
)

// A bad number is refused in words naming it and nothing is saved; good
// ones are kept and the model loads again with them.
func TestSettingsThreadsAndContext(t *testing.T) {
	st := store.At(t.TempDir())
	a := started(t, Options{Store: st})
	s := a.settings
	s.threads.SetText("many")
	test.Tap(s.apply)
	if !strings.Contains(s.problem.Text(), `threads must be a whole number`) || !strings.Contains(s.problem.Text(), `"many"`) {
		t.Fatalf("problem %q", s.problem.Text())
	}
	if p := loadPrefs(st); p.Threads != 0 {
		t.Fatalf("a refused value was saved: %+v", p)
	}
	s.threads.SetText("1")
	s.ctx.SetText("256")
	test.Tap(s.apply)
	if s.problem.Text() != "" {
		t.Fatalf("good values refused: %q", s.problem.Text())
	}
	waitLoaded(t, a)
	r, _ := a.sess.loaded()
	if r.Threads() != 1 || r.Context() != 256 {
		t.Errorf("reloaded with %d threads, context %d", r.Threads(), r.Context())
	}
	if p := loadPrefs(st); p.Threads != 1 || p.Ctx != 256 {
		t.Errorf("saved %+v", p)
	}
	if !strings.Contains(a.chat.ctxBar.TextFormatter(), "of 256 tokens") {
		t.Errorf("the context meter says %q", a.chat.ctxBar.TextFormatter())
	}
}

// The API server in the app answers ollama's and OpenAI's clients on its
// own slot while the window keeps the other. Ticking the box starts it:
// a model loaded without a slot for it loads again with one, after which
// unticking stops it and ticking starts it at once, with no load.
func TestSettingsAPIServer(t *testing.T) {
	st := store.At(t.TempDir())
	a := started(t, Options{Store: st})
	s := a.settings
	s.address.SetText("127.0.0.1:0")
	s.api.SetChecked(true)
	waitLoaded(t, a)
	addr, err := a.sess.serving()
	if addr == "" || err != nil {
		t.Fatalf("not serving: %v", err)
	}
	if !strings.Contains(s.apiStatus.Text, "Serving on http://"+addr) {
		t.Errorf("status %q", s.apiStatus.Text)
	}
	if p := loadPrefs(st); !p.APIServer || p.APIAddress != "127.0.0.1:0" {
		t.Errorf("saved %+v", p)
	}
	res, err := http.Get("http://" + addr + "/api/tags")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	_, m := a.sess.loaded()
	if res.StatusCode != 200 || !strings.Contains(string(body), `"`+strings.TrimSuffix(m.Name, ".gguf")+`:latest"`) { // ollama names carry a tag
		t.Fatalf("/api/tags: %d %s", res.StatusCode, body)
	}
	res, err = http.Post("http://"+addr+"/v1/completions", "application/json",
		strings.NewReader(`{"model":"default","prompt":"Once upon a time","max_tokens":8,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Choices []struct{ Text string }
	}
	err = json.NewDecoder(res.Body).Decode(&out)
	res.Body.Close()
	if err != nil || res.StatusCode != 200 || len(out.Choices) != 1 || out.Choices[0].Text == "" {
		t.Fatalf("completion: %d %v %+v", res.StatusCode, err, out)
	}
	send(t, a, "Once upon a time") // the window's slot still answers
	if a.chat.conv.Messages[1].Error != "" {
		t.Errorf("the window's reply: %s", a.chat.conv.Messages[1].Error)
	}

	r, _ := a.sess.loaded()
	s.api.SetChecked(false)
	if addr2, _ := a.sess.serving(); addr2 != "" || a.chat.isLoading() {
		t.Fatalf("unticked: still serving on %q, loading %v", addr2, a.chat.isLoading())
	}
	if _, err := http.Get("http://" + addr + "/api/tags"); err == nil {
		t.Error("the old address still answers")
	}
	if s.apiStatus.Text != "Off." || loadPrefs(st).APIServer {
		t.Errorf("unticked: status %q, saved %+v", s.apiStatus.Text, loadPrefs(st))
	}
	s.api.SetChecked(true)
	if addr, _ = a.sess.serving(); addr == "" || a.chat.isLoading() {
		t.Fatalf("ticked again: serving on %q, loading %v", addr, a.chat.isLoading())
	}
	if r2, _ := a.sess.loaded(); r2 != r {
		t.Error("ticking again loaded the model again")
	}

	// Moved to an address another program holds: said in words, the
	// system's error behind Details.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	s.address.SetText(busy.Addr().String())
	test.Tap(s.useAddress)
	if got := s.apiProblem.Text(); !strings.Contains(got, "Another program already listens") {
		t.Errorf("a busy address: problem %q, status %q", got, s.apiStatus.Text)
	}
	if !strings.Contains(s.apiProblem.raw.Text, "address already in use") {
		t.Errorf("details %q", s.apiProblem.raw.Text)
	}
}

// A box ticked with no address, or one without a port, is set back and
// says what to type; nothing is saved.
func TestSettingsAPIBadAddress(t *testing.T) {
	st := store.At(t.TempDir())
	a := newTestApp(t, Options{Store: st, SkipSetup: true})
	s := a.settings
	for addr, want := range map[string]string{"": "needs an address", "localhost": "host:port"} {
		s.address.SetText(addr)
		s.api.SetChecked(true)
		if s.api.Checked || !strings.Contains(s.apiProblem.Text(), want) {
			t.Errorf("address %q: ticked %v, problem %q", addr, s.api.Checked, s.apiProblem.Text())
		}
		if loadPrefs(st).APIServer {
			t.Errorf("address %q: saved on", addr)
		}
	}
}

// The lossless check generates with the draft drafting every round and
// without, and says they are the same.
func TestSettingsLosslessCheck(t *testing.T) {
	a := started(t, Options{})
	s := a.settings
	test.Tap(s.check)
	waitFor(t, "the check's end", func() bool { return !s.isChecking() })
	if !strings.HasPrefix(s.result.Text, "The same text, token for token, over ") || strings.Contains(s.result.Text, "over 0 ") {
		t.Fatalf("check: %q", s.result.Text)
	}
}

// The target's layers on the GPU: a value that is not auto, 0 or a number
// is refused in words; a good one is saved and the model loads with it
// (here, with no GPU, on the CPU all the same).
func TestSettingsGPULayers(t *testing.T) {
	st := store.At(t.TempDir())
	a := started(t, Options{Store: st})
	s := a.settings
	s.layers.SetText("lots")
	test.Tap(s.apply)
	if !strings.Contains(s.problem.Text(), "Target layers on the GPU") || !strings.Contains(s.problem.Text(), `"lots"`) {
		t.Fatalf("problem %q", s.problem.Text())
	}
	if p := loadPrefs(st); p.GPULayers != "" {
		t.Fatalf("a refused value was saved: %+v", p)
	}
	s.layers.SetText("0")
	test.Tap(s.apply)
	if s.problem.Text() != "" {
		t.Fatalf("0 refused: %q", s.problem.Text())
	}
	waitLoaded(t, a)
	if p := loadPrefs(st); p.GPULayers != "0" {
		t.Errorf("saved %+v", p)
	}
}
