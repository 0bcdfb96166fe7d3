package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"

	"dovetail/engine"
)

// responder shapes one endpoint's answers; execute drives it.
type responder interface {
	// first is the chunk that opens a stream (nil: none).
	first() any
	// delta carries new text.
	delta(text string) any
	// last carries the finish reason (and Dovetail's statistics).
	last(finish string, st engine.Stats) any
	// usage is the chunk stream_options.include_usage asks for.
	usage(st engine.Stats) any
	// whole is the non-streaming answer.
	whole(text, finish string, st engine.Stats) any
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

// execute waits for a slot, runs j and answers through resp, streaming or
// not. Validation is done before: nothing here is the client's fault
// except leaving.
func (s *Server) execute(w http.ResponseWriter, r *http.Request, j *job, resp responder) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.base, cancel)()

	wk, err := s.sched.acquire(ctx)
	switch {
	case errors.Is(err, errNoRoom):
		writeError(w, errQueueFull)
		return
	case err != nil && s.base.Err() != nil:
		writeError(w, errShuttingDown)
		return
	case err != nil:
		return // the client left while waiting
	}
	defer s.sched.release(wk)

	if !j.stream {
		var text []byte
		st, finish, err := s.run(ctx, wk, j, func(t string) error { text = append(text, t...); return nil })
		if err != nil {
			if ctx.Err() == nil {
				writeError(w, serverError(err))
			} else if s.base.Err() != nil && r.Context().Err() == nil {
				writeError(w, errShuttingDown)
			}
			return
		}
		writeJSON(w, http.StatusOK, resp.whole(string(text), finish, st))
		return
	}

	sse := startSSE(w)
	if c := resp.first(); c != nil {
		if sse.send(c) != nil {
			return
		}
	}
	st, finish, err := s.run(ctx, wk, j, func(t string) error { return sse.send(resp.delta(t)) })
	if err != nil {
		if ctx.Err() == nil && r.Context().Err() == nil {
			sse.send(errorBody{Error: serverError(err)})
		}
		return
	}
	if sse.send(resp.last(finish, st)) != nil {
		return
	}
	if j.includeUsage && sse.send(resp.usage(st)) != nil {
		return
	}
	sse.done()
}

// errStopString ends generation from the emit callback.
var errStopString = errors.New("stop string reached")

// run generates on wk and hands text to onText as soon as it is final:
// complete UTF-8, and past any point where a stop string could begin. It
// returns the finish reason, "stop" (end-of-generation token or stop
// string) or "length". An error from onText (the client is gone) or a
// cancelled ctx ends generation at the next token.
func (s *Server) run(ctx context.Context, wk *worker, j *job, onText func(string) error) (engine.Stats, string, error) {
	tok := s.model.Tok
	dec := tok.NewDecoder()
	sm := &stopMatcher{stops: j.stops}
	stopped := false
	req := engine.Request{Prompt: j.prompt, MaxTokens: j.maxTokens, Sampler: j.sampler, Stop: tok.IsEOG}
	st, err := wk.slot.Generate(ctx, req, func(id int) error {
		out, stop := sm.add(dec.Add(id))
		if out != "" {
			if err := onText(out); err != nil {
				return err
			}
		}
		if stop {
			stopped = true
			return errStopString
		}
		return nil
	})
	s.observe(st)
	if err != nil && !errors.Is(err, errStopString) {
		return st, "", err
	}
	finish := st.StopReason
	if !stopped {
		out, stop := sm.add(dec.Flush())
		if stop {
			finish = "stop"
		} else {
			out += sm.flush()
		}
		if out != "" {
			if err := onText(out); err != nil {
				return st, "", err
			}
		}
	} else {
		finish = "stop"
	}
	if finish != "stop" {
		finish = "length"
	}
	return st, finish, nil
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
