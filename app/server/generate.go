package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"dovetail/app/runner"
	"dovetail/engine"
)

// responder shapes one endpoint's answers; execute drives it.
type responder interface {
	// first is the chunk that opens a stream (nil: none).
	first() any
	// delta carries new text and the logprobs of its tokens (nil: not
	// asked for).
	delta(text string, lps []tokenLogprob) any
	// last carries the finish reason (and Dovetail's statistics).
	last(finish string, st engine.Stats) any
	// usage is the chunk stream_options.include_usage asks for (nil:
	// none).
	usage(st engine.Stats) any
	// whole is the non-streaming answer.
	whole(text string, lps []tokenLogprob, finish string, st engine.Stats) any
	// failed is the stream's last chunk when generation fails midway (a
	// shutdown).
	failed(e *apiError) any
}

// stream writes a streamed answer: server-sent events for OpenAI's API,
// newline-delimited JSON for ollama's.
type stream interface {
	send(v any) error
	done() error
}

// usageInfo is OpenAI's token accounting.
type usageInfo struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func usageOf(st engine.Stats) *usageInfo {
	return &usageInfo{PromptTokens: st.PromptTokens, CompletionTokens: st.GenTokens, TotalTokens: st.PromptTokens + st.GenTokens}
}

// statsInfo is Dovetail's extension to a response: what the generation
// measured. The speculative fields are zero when no draft runs.
type statsInfo struct {
	PromptTokensPerSec float64 `json:"prompt_tokens_per_s"`
	GenTokensPerSec    float64 `json:"gen_tokens_per_s"`
	PromptMs           float64 `json:"prompt_ms"`
	GenMs              float64 `json:"gen_ms"`
	Rounds             int     `json:"rounds"`
	Tau                float64 `json:"tau"`
	DraftVersion       int     `json:"draft_version"`
}

func statsOf(st engine.Stats) *statsInfo {
	return &statsInfo{
		PromptTokensPerSec: st.PromptTokensPerSec(), GenTokensPerSec: st.GenTokensPerSec(),
		PromptMs: float64(st.PromptTime.Microseconds()) / 1000, GenMs: float64(st.GenTime.Microseconds()) / 1000,
		Rounds: st.Rounds, Tau: st.Tau(), DraftVersion: st.DraftVersion,
	}
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// lease holds the model a request names until release, loading it if need
// be. When it cannot, the error is answered and ok is false.
func (s *Server) lease(w http.ResponseWriter, r *http.Request, name string) (_ *runner.Lease, ok bool) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.base, cancel)()
	l, err := s.fleet.Acquire(ctx, name)
	switch {
	case err == nil:
		return l, true
	case errors.Is(err, runner.ErrNoModel):
		writeError(w, s.unknownModel(name))
	case s.base.Err() != nil:
		writeError(w, errShuttingDown)
	case r.Context().Err() != nil: // the client left while the model loaded
	default:
		writeError(w, serverError(fmt.Errorf("the model %s could not be loaded: %w", name, err)))
	}
	return nil, false
}

// acquire waits for a slot of r, a request's turn in its queue; ok false
// is answered through w (a full queue, a shutdown) or a client that left.
// ctx is the request's, cancelled by the server's stop too.
func (s *Server) acquire(ctx context.Context, w http.ResponseWriter, r *runner.Runner) (wk *worker, release func(), ok bool) {
	sched := s.scheduler(r)
	wk, err := sched.acquire(ctx)
	switch {
	case errors.Is(err, errNoRoom):
		writeError(w, errQueueFull)
		return nil, nil, false
	case err != nil && s.base.Err() != nil:
		writeError(w, errShuttingDown)
		return nil, nil, false
	case err != nil:
		return nil, nil, false // the client left while waiting
	}
	return wk, func() { sched.release(wk) }, true
}

// execute waits for a slot of the leased model, runs j and answers
// through resp, streaming or not. Validation is done before: nothing here
// is the client's fault except leaving.
func (s *Server) execute(w http.ResponseWriter, r *http.Request, j *job, resp responder, open func() stream) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.base, cancel)()
	wk, release, ok := s.acquire(ctx, w, j.lease.Runner())
	if !ok {
		return
	}
	defer release()

	if !j.stream {
		var text []byte
		st, finish, lps, err := s.run(ctx, wk, j, func(t string, _ []tokenLogprob) error { text = append(text, t...); return nil })
		if err != nil {
			if ctx.Err() == nil {
				writeError(w, serverError(err))
			} else if s.base.Err() != nil && r.Context().Err() == nil {
				writeError(w, errShuttingDown)
			}
			return
		}
		writeJSON(w, http.StatusOK, resp.whole(string(text), lps, finish, st))
		return
	}

	out := open()
	if c := resp.first(); c != nil {
		if out.send(c) != nil {
			return
		}
	}
	st, finish, _, err := s.run(ctx, wk, j, func(t string, lps []tokenLogprob) error { return out.send(resp.delta(t, lps)) })
	if err != nil {
		// A client that left gets nothing; one the server leaves (a
		// shutdown) is told, and the stream ends as streams end.
		switch {
		case s.base.Err() != nil:
			out.send(resp.failed(errShuttingDown))
			out.done()
		case r.Context().Err() != nil:
		default:
			out.send(resp.failed(serverError(err)))
			out.done()
		}
		return
	}
	if out.send(resp.last(finish, st)) != nil {
		return
	}
	if u := resp.usage(st); j.includeUsage && u != nil && out.send(u) != nil {
		return
	}
	out.done()
}

// run generates on wk and hands text to onText as soon as it is final
// (runner.Piece), with the logprobs of its tokens when the job asks for
// them. It returns the finish reason, "stop" (end-of-generation token or
// stop string) or "length", and every token's logprobs. An error from
// onText (the client is gone) or a cancelled ctx ends generation at the
// next token.
func (s *Server) run(ctx context.Context, wk *worker, j *job, onText func(string, []tokenLogprob) error) (engine.Stats, string, []tokenLogprob, error) {
	tok := j.lease.Model().Tok
	convert := func(in []engine.Logprob) (out []tokenLogprob) {
		for _, lp := range in {
			out = append(out, tokenLogprobOf(tok, lp))
		}
		return out
	}
	req := runner.TextRequest{Prompt: j.prompt, MaxTokens: j.maxTokens, Sampler: j.sampler, Stops: j.stops,
		Logprobs: j.logprobs, TopLogprobs: j.topLogprobs,
		OnText: func(p runner.Piece) error { return onText(p.Text, convert(p.Logprobs)) }}
	res, err := wk.slot.GenerateText(ctx, req)
	s.observe(res.Stats)
	if err != nil {
		return res.Stats, "", nil, err
	}
	if j.onToken != nil {
		for _, id := range res.Tokens {
			j.onToken(id)
		}
	}
	finish := res.Finish
	if finish != "stop" {
		finish = "length"
	}
	return res.Stats, finish, convert(res.Logprobs), nil
}

func (s *Server) observe(st engine.Stats) {
	m := s.metrics
	m.promptTokens.Add(float64(st.PromptTokens))
	m.genTokens.Add(float64(st.GenTokens))
	if r := st.PromptTokensPerSec(); r > 0 {
		m.promptRate.Observe(r)
	}
	if r := st.GenTokensPerSec(); r > 0 && st.GenTokens > 0 {
		m.genRate.Observe(r)
	}
	if st.Rounds > 0 {
		m.specTau.Set(st.Tau())
	}
	if st.DraftVersion > 0 {
		m.draftVersion.Set(float64(st.DraftVersion))
	}
}

// since is the nanoseconds since t (ollama reports durations so).
func since(t time.Time) int64 { return time.Since(t).Nanoseconds() }
