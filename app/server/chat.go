package server

import (
	"errors"
	"net/http"

	"dovetail/app/runner"
	"dovetail/engine"
	"dovetail/models/chat"
)

// chatCompletion is both OpenAI's chat.completion and its
// chat.completion.chunk; the choices differ.
type chatCompletion struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []chatChoice `json:"choices"`
	Usage             *usageInfo   `json:"usage,omitempty"`
	Dovetail          *statsInfo   `json:"dovetail,omitempty"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      *chatContent  `json:"message,omitempty"`
	Delta        *chatContent  `json:"delta,omitempty"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type chatContent struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	var req genRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	j := &job{chat: true}
	if e := s.parseCommon(&req, j); e != nil {
		writeError(w, e)
		return
	}
	msgs, e := parseMessages(req.Messages)
	if e != nil {
		writeError(w, e)
		return
	}
	lease, ok := s.lease(w, r, req.Model)
	if !ok {
		return
	}
	defer lease.Release(0, false)
	j.lease = lease
	if j.prompt, e = chatPrompt(lease.Model(), msgs); e != nil {
		writeError(w, e)
		return
	}
	if e := s.resolveMaxTokens(&req, j, 0); e != nil {
		writeError(w, e)
		return
	}
	resp := &chatResponder{logprobs: j.logprobs, base: chatCompletion{ID: newID("chatcmpl-"), Created: now(),
		Model: lease.Entry().Name, SystemFingerprint: systemFingerprint(lease.Model())}}
	s.execute(w, r, j, resp, func() stream { return startSSE(w) })
}

// chatPrompt renders msgs with the model's template and tokenizes them
// (runner.Model.ChatTokens); a template's refusal is the client's error.
func chatPrompt(m *runner.Model, msgs []chat.Message) ([]int, *apiError) {
	ids, err := m.ChatTokens(msgs)
	if err != nil {
		var te *chat.TemplateError
		if errors.As(err, &te) {
			return nil, invalid("messages", "", "The model's chat template rejected the conversation: %s", te.Message)
		}
		return nil, serverError(err)
	}
	return ids, nil
}

type chatResponder struct {
	base     chatCompletion
	logprobs bool
}

// lp is a choice's logprobs: nil when not asked for.
func (c *chatResponder) lp(lps []tokenLogprob) *chatLogprobs {
	if !c.logprobs {
		return nil
	}
	if lps == nil {
		lps = []tokenLogprob{}
	}
	return &chatLogprobs{Content: lps}
}

func (c *chatResponder) chunk(ch chatChoice) *chatCompletion {
	out := c.base
	out.Object = "chat.completion.chunk"
	out.Choices = []chatChoice{ch}
	return &out
}

func (c *chatResponder) first() any {
	empty := ""
	return c.chunk(chatChoice{Delta: &chatContent{Role: "assistant", Content: &empty}})
}

func (c *chatResponder) delta(text string, lps []tokenLogprob) any {
	return c.chunk(chatChoice{Delta: &chatContent{Content: &text}, Logprobs: c.lp(lps)})
}

func (c *chatResponder) last(finish string, st engine.Stats) any {
	out := c.chunk(chatChoice{Delta: &chatContent{}, FinishReason: &finish})
	out.Dovetail = statsOf(st)
	return out
}

func (c *chatResponder) usage(st engine.Stats) any {
	out := c.base
	out.Object = "chat.completion.chunk"
	out.Choices = []chatChoice{}
	out.Usage = usageOf(st)
	return &out
}

func (c *chatResponder) whole(text string, lps []tokenLogprob, finish string, st engine.Stats) any {
	out := c.base
	out.Object = "chat.completion"
	out.Choices = []chatChoice{{Message: &chatContent{Role: "assistant", Content: &text}, Logprobs: c.lp(lps), FinishReason: &finish}}
	out.Usage = usageOf(st)
	out.Dovetail = statsOf(st)
	return &out
}

func (c *chatResponder) failed(e *apiError) any { return errorBody{Error: e} }
