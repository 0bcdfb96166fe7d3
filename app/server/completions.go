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
	Text         string  `json:"text"`
	Index        int     `json:"index"`
	Logprobs     any     `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
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
	var e *apiError
	if j.prompt, e = s.parsePrompt(req.Prompt); e != nil {
		writeError(w, e)
		return
	}
	if e := s.resolveMaxTokens(&req, j, defaultCompletionTokens); e != nil {
		writeError(w, e)
		return
	}
	s.execute(w, r, j, &textResponder{base: textCompletion{ID: newID("cmpl-"), Object: "text_completion",
		Created: now(), Model: s.model.Name, SystemFingerprint: s.fp}})
}

type textResponder struct{ base textCompletion }

func (c *textResponder) with(ch textChoice) *textCompletion {
	out := c.base
	out.Choices = []textChoice{ch}
	return &out
}

func (c *textResponder) first() any { return nil }

func (c *textResponder) delta(text string) any { return c.with(textChoice{Text: text}) }

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

func (c *textResponder) whole(text, finish string, st engine.Stats) any {
	out := c.with(textChoice{Text: text, FinishReason: &finish})
	out.Usage = usageOf(st)
	out.Dovetail = statsOf(st)
	return out
}
