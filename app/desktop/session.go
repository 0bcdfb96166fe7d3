package desktop

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"dovetail/app/api"
	"dovetail/app/runner"
	"dovetail/app/runner/store"
	"dovetail/engine"
	"dovetail/models/chat"
)

// session is the model the app runs: opened, placed and ready to chat.
// Loading and generating run off the UI's goroutine; the session's state
// is read under its lock.
type session struct {
	st *store.Store

	mu    sync.Mutex
	model *runner.Model
	run   *runner.Runner
	// Generations under way on the runner: close cancels them (stop) and
	// waits for them (gen) before it frees what they use.
	stop     context.CancelFunc
	stopped  context.Context
	gen      sync.WaitGroup
	settings []string      // the settings setup chose that this load used
	requests []requestStat // the model's replies, kept across restarts (replies.go)
	histErr  error         // why the kept replies could not be read
	adapt    *runner.Adapt // how drafts adapt (nil: the default)
	start    api.Start     // the API server (nil: none in this build)
	srv      api.Server
	srvStop  func()
	srvAddr  string
	srvErr   error
}

// loadOptions say how the session loads a model.
type loadOptions struct {
	path       string // "": the embedded model
	prefs      Prefs
	newDrafter func(slot int) (engine.Drafter, error) // tests: a drafter of their own
	notify     func(runner.Notice)
	prepare    func() error // run after the current model closed, before the next opens; its error is a warning
}

// load opens and places a model in place of the current one: its settings
// from setup, the app's preferences over them. It blocks; call it off the
// UI goroutine.
func (s *session) load(o loadOptions) error {
	s.close()
	if o.prepare != nil {
		if err := o.prepare(); err != nil && o.notify != nil { // the model loads all the same
			o.notify(runner.Notice{Warning: true, Text: err.Error()})
		}
	}
	m, err := runner.OpenModel(o.path)
	if err != nil {
		return err
	}
	opts := runner.DefaultOptions()
	opts.Store, opts.Notify, opts.NewDrafter = s.st, o.notify, o.newDrafter
	if s.adapt != nil {
		opts.Adapt = *s.adapt
	}
	var used []string
	if set, err := runner.LoadSettings(s.st); err == nil {
		if ms, ok := set.Models[m.Fingerprint]; ok {
			used = ms.Apply(&opts, func(string) bool { return false })
		}
	}
	if o.prefs.Threads > 0 {
		opts.Threads = o.prefs.Threads
	}
	if o.prefs.Ctx > 0 {
		opts.Ctx = o.prefs.Ctx
	}
	if n, err := runner.ParseGPULayers(o.prefs.GPULayers); o.prefs.GPULayers != "" && err == nil {
		opts.GPULayers = n
	}
	if o.prefs.MemoryOff {
		opts.Adapt.Engine.MemoryTokens = 0
	}
	if o.prefs.APIServer {
		opts.Slots = 2 // one for the window, one for the API
	}
	r, err := runner.New(m, opts)
	if err != nil && opts.Slots > 1 {
		opts.Slots = 1 // the API server is the first to give way
		r, err = runner.New(m, opts)
	}
	if err != nil {
		m.Close()
		return err
	}
	reqs, herr := loadReplies(s.st, m.Fingerprint)
	s.mu.Lock()
	s.model, s.run, s.settings, s.requests, s.histErr = m, r, used, reqs, herr
	s.stopped, s.stop = context.WithCancel(context.Background())
	s.mu.Unlock()
	if o.prefs.APIServer {
		s.serve(o.prefs.APIAddress)
	}
	return nil
}

// loaded is the runner and model, nil before a load.
func (s *session) loaded() (*runner.Runner, *runner.Model) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run, s.model
}

// begin registers a generation on the loaded runner: its context ends
// with ctx or when the session closes; end must be called when it is
// over. Without a runner it returns nil.
func (s *session) begin(ctx context.Context) (*runner.Runner, *runner.Model, context.Context, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.run == nil {
		return nil, nil, nil, nil
	}
	s.gen.Add(1)
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(s.stopped, cancel)
	return s.run, s.model, ctx, func() { unhook(); cancel(); s.gen.Done() }
}

// close stops the API server, stops the generations under way and waits
// for them, and closes the runner (which saves the draft) and the model.
func (s *session) close() error {
	s.stopServing()
	s.mu.Lock()
	r, m, stop := s.run, s.model, s.stop
	s.run, s.model = nil, nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
	s.gen.Wait()
	var err error
	if r != nil {
		err = r.Close()
	}
	if m != nil {
		m.Close()
	}
	return err
}

// serve starts the API server in process on addr (loopback by default),
// answering on the runner's second slot.
func (s *session) serve(addr string) {
	s.stopServing()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srvErr = nil
	if s.run == nil {
		return
	}
	if s.run.Slots() < 2 {
		s.srvErr = errors.New("no room in memory for a second sequence")
		return
	}
	if s.start == nil {
		s.srvErr = errors.New("this build has no API server")
		return
	}
	host, _, _ := net.SplitHostPort(addr)
	srv, err := s.start(api.Config{Runner: s.run, ReserveSlots: 1, Queue: 16, AllowedHosts: []string{host}})
	if err != nil {
		s.srvErr = err
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		s.srvErr = err
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(done) }()
	s.srv, s.srvAddr = srv, ln.Addr().String()
	s.srvStop = func() { cancel(); <-done; srv.Close() }
}

// serving is the API server's address ("" when off) and why it is not
// running when it should.
func (s *session) serving() (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return "", s.srvErr
	}
	return s.srvAddr, nil
}

func (s *session) stopServing() {
	s.mu.Lock()
	stop := s.srvStop
	s.srv, s.srvStop, s.srvAddr = nil, nil, ""
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// reply is what a generation hands the chat as it goes.
type reply struct {
	segments []Segment
	text     string
	stats    MsgStats
	done     bool
	err      error
	dropped  int // the oldest messages its prompt left out
	ctx      int // the context it had
}

// generate answers conv's messages on the window's slot, calling update
// with the reply so far after every round and once done. ctx stops it.
// A conversation that outgrows the context loses its oldest messages,
// unless stopAtLimit.
func (s *session) generate(ctx context.Context, system string, msgs []Message, p Preset, seed uint64, stopAtLimit bool, update func(reply)) {
	r, m, ctx, end := s.begin(ctx)
	if r == nil {
		update(reply{done: true, err: errors.New("no model is loaded")})
		return
	}
	defer end()
	fit, err := fitContext(m, r.Context(), system, msgs, replyRoom(r.Context(), p.MaxTokens), stopAtLimit)
	if err != nil {
		update(reply{done: true, err: err})
		return
	}
	prompt := fit.prompt
	params := p.params(seed)
	if err := params.Validate(); err != nil {
		update(reply{done: true, err: err})
		return
	}
	rep := reply{dropped: fit.dropped, ctx: r.Context()}
	var text strings.Builder
	start := time.Now()
	first := time.Duration(0)
	req := runner.TextRequest{Prompt: prompt, Sampler: params, MaxTokens: p.MaxTokens,
		OnRound: func(rd engine.Round, texts []string) {
			for i, piece := range texts {
				text.WriteString(piece)
				rep.segments = appendSegment(rep.segments, piece, rd.Sources[i])
			}
			if first == 0 {
				first = time.Since(start)
			}
			rep.text, rep.stats.TokensPerSec, rep.stats.Tau, rep.stats.DraftVersion = text.String(), rd.TokensPerSec, rd.Tau, rd.DraftVersion
			update(rep)
		}}
	res, err := r.Slot(0).GenerateText(ctx, req)
	st := res.Stats
	if tail, ok := strings.CutPrefix(res.Text, text.String()); ok && tail != "" {
		text.WriteString(tail)
		rep.segments = appendSegment(rep.segments, tail, engine.FromTarget)
	}
	rep.text, rep.done = text.String(), true
	rep.stats = MsgStats{Tokens: st.GenTokens, TokensPerSec: st.GenTokensPerSec(), FirstTokenMs: float64(first.Nanoseconds()) / 1e6,
		Rounds: st.Rounds, Tau: st.Tau(), DraftVersion: st.DraftVersion, Stopped: ctx.Err() != nil,
		Drafted: r.Slot(0).Drafter() != nil, PlainSteps: st.PlainSteps,
		ContextFull: res.Finish == "length" && st.PromptTokens+st.GenTokens >= r.Context()}
	if plain := s.plainSpeed(); plain > 0 && rep.stats.TokensPerSec > 0 {
		rep.stats.Baseline, rep.stats.Speedup = plain, rep.stats.TokensPerSec/plain
	}
	if err != nil && ctx.Err() == nil {
		rep.err = err
	}
	if st.GenTokens > 0 {
		s.remember(r, m, st)
	}
	update(rep)
}

// plainSpeed is the target alone's speed: calibrated, or as the planner
// measured it (0: unknown).
func (s *session) plainSpeed() float64 {
	r, m := s.loaded()
	if r == nil {
		return 0
	}
	if c, ok := runner.CachedCalibration(s.st, m, r.Threads()); ok && c.Plain > 0 {
		return c.Plain
	}
	if p := r.Planner(); p != nil {
		return p.DecodeTokensPerSec()
	}
	return 0
}

// appendSegment adds a piece of text from src, joining it to the last
// segment when that came from the same source.
func appendSegment(segs []Segment, piece string, src engine.Source) []Segment {
	if piece == "" {
		return segs
	}
	if n := len(segs); n > 0 && segs[n-1].Source == src {
		segs[n-1].Text += piece
		return segs
	}
	return append(segs, Segment{Text: piece, Source: src})
}

// remember adds a reply to the model's history and keeps it; the
// version is the trainer's, as the learning view and the saved drafts
// number them.
func (s *session) remember(r *runner.Runner, m *runner.Model, st engine.Stats) {
	rs := requestStat{At: time.Now().UTC(), Tau: st.Tau(), TokensPerSec: st.GenTokensPerSec(), Rounds: st.Rounds, DraftVersion: st.DraftVersion}
	if a, ok := r.Adaptation(); ok {
		rs.DraftVersion = a.Version
	}
	s.mu.Lock()
	s.requests = append(s.requests, rs)
	h := append([]requestStat(nil), s.requests...)
	s.mu.Unlock()
	if err := saveReplies(s.st, m.Fingerprint, h); err != nil {
		s.mu.Lock()
		s.histErr = fmt.Errorf("the speed history is not kept (%v): the charts start again at the next start", err)
		s.mu.Unlock()
	}
}

// history is the model's replies, oldest first, for the charts, and why
// the kept ones could not be read or kept (nil: they were).
func (s *session) history() ([]requestStat, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]requestStat(nil), s.requests...), s.histErr
}

// chatMessages is a conversation as the chat template reads it.
func chatMessages(system string, msgs []Message) []chat.Message {
	var cm []chat.Message
	if system != "" {
		cm = append(cm, chat.Message{Role: "system", Content: system})
	}
	for _, x := range msgs {
		cm = append(cm, chat.Message{Role: x.Role, Content: x.Content})
	}
	return cm
}

// contextUse is the tokens the conversation takes and the context.
func (s *session) contextUse(system string, msgs []Message) (used, total int) {
	r, m := s.loaded()
	if r == nil {
		return 0, 0
	}
	ids, _ := m.ChatTokens(chatMessages(system, msgs))
	return len(ids), r.Context()
}

// check is what a lossless check found: whether the texts are the same,
// both, and the speculative run's rounds.
type check struct {
	same        bool
	spec, plain string
	rounds      int
	tau         float64
}

// checkLossless generates greedily with the draft proposing every round
// (no planner to skip it) and with the target alone, and compares.
func (s *session) checkLossless(ctx context.Context, prompt string, n int) (check, error) {
	r, m, ctx, end := s.begin(ctx)
	if r == nil {
		return check{}, errors.New("no model is loaded")
	}
	defer end()
	slot := r.Slot(0)
	if slot.Drafter() == nil {
		return check{}, errors.New("this model runs without a draft: there is nothing to check")
	}
	ids := m.Tok.Encode(prompt, true, false)
	var a, b []int
	req := engine.Request{Prompt: ids, MaxTokens: n, Stop: m.Tok.IsEOG, Drafter: slot.Drafter(), Tree: r.Tree()}
	st, err := slot.Generate(ctx, req, func(t int) error { a = append(a, t); return nil })
	if err != nil {
		return check{}, err
	}
	if _, err := slot.Plain(ctx, req, func(t int) error { b = append(b, t); return nil }); err != nil {
		return check{}, err
	}
	c := check{same: slices.Equal(a, b), spec: m.Tok.Decode(a), plain: m.Tok.Decode(b), rounds: st.Rounds, tau: st.Tau()}
	return c, nil
}
