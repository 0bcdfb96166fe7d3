package server

import (
	"net/http"

	"dovetail/engine"
)

// textCompletion is OpenAI's text_completion, streamed or whole.
type textCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []textChoice `json:"choices"`
	Usage             *usageInfo   `json:"usage,omitempty"`
	Dovetail          *statsInfo   `json:"dovetail,omitempty"`
}

type textChoice struct {
	Text         string        `json:"text"`
	Index        int           `json:"index"`
	Logprobs     *textLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	var req genRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	j := &job{}
	if e := s.parseCommon(&req, j); e != nil {
		writeError(w, e)
		return
	}
	lease, ok := s.lease(w, r, req.Model)
	if !ok {
		return
	}
	defer lease.Release(0, false)
	j.lease = lease
	var e *apiError
	if j.prompt, e = parsePrompt(lease.Model().Tok, req.Prompt); e != nil {
		writeError(w, e)
		return
	}
	if e := s.resolveMaxTokens(&req, j, defaultCompletionTokens); e != nil {
		writeError(w, e)
		return
	}
	resp := &textResponder{logprobs: j.logprobs, base: textCompletion{ID: newID("cmpl-"), Object: "text_completion",
		Created: now(), Model: lease.Entry().Name, SystemFingerprint: systemFingerprint(lease.Model())}}
	s.execute(w, r, j, resp, func() stream { return startSSE(w) })
}

type textResponder struct {
	base     textCompletion
	logprobs bool
	offset   int // of the next text, for text_offset
}

func (c *textResponder) lp(lps []tokenLogprob) *textLogprobs {
	if !c.logprobs {
		return nil
	}
	return textLogprobsOf(lps, c.offset)
}

func (c *textResponder) with(ch textChoice) *textCompletion {
	out := c.base
	out.Choices = []textChoice{ch}
	return &out
}

func (c *textResponder) first() any { return nil }

func (c *textResponder) delta(text string, lps []tokenLogprob) any {
	out := c.with(textChoice{Text: text, Logprobs: c.lp(lps)})
	c.offset += len(text)
	return out
}

func (c *textResponder) last(finish string, st engine.Stats) any {
	out := c.with(textChoice{FinishReason: &finish})
	out.Dovetail = statsOf(st)
	return out
}

func (c *textResponder) usage(st engine.Stats) any {
	out := c.base
	out.Choices = []textChoice{}
	out.Usage = usageOf(st)
	return &out
}

func (c *textResponder) whole(text string, lps []tokenLogprob, finish string, st engine.Stats) any {
	out := c.with(textChoice{Text: text, Logprobs: c.lp(lps), FinishReason: &finish})
	out.Usage = usageOf(st)
	out.Dovetail = statsOf(st)
	return out
}

func (c *textResponder) failed(e *apiError) any { return errorBody{Error: e} }
