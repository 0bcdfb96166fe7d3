package server

import (
	"time"

	"dovetail/engine"
)

// What ollama's generating endpoints answer: chunks, the last with the
// statistics, as NDJSON or one object.

// ollamaDone is a final object's fields.
type ollamaDone struct {
	Done               bool       `json:"done"`
	DoneReason         string     `json:"done_reason,omitempty"`
	TotalDuration      int64      `json:"total_duration,omitempty"`
	LoadDuration       int64      `json:"load_duration,omitempty"`
	PromptEvalCount    int        `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration int64      `json:"prompt_eval_duration,omitempty"`
	EvalCount          int        `json:"eval_count,omitempty"`
	EvalDuration       int64      `json:"eval_duration,omitempty"`
	Dovetail           *statsInfo `json:"dovetail,omitempty"`
}

type ollamaMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ollamaChunk is /api/chat's object (Message) and /api/generate's
// (Response, Context).
type ollamaChunk struct {
	Model     string         `json:"model"`
	CreatedAt time.Time      `json:"created_at"`
	Message   *ollamaMessage `json:"message,omitempty"`
	Response  *string        `json:"response,omitempty"`
	Context   []int          `json:"context,omitempty"`
	Error     string         `json:"error,omitempty"`
	ollamaDone
}

// ollamaResponder answers /api/chat (chat true) and /api/generate.
type ollamaResponder struct {
	model     string
	chat      bool
	start     time.Time
	load      time.Duration
	prompt    []int
	generated []int // /api/generate's context: the tokens emitted
}

func (o *ollamaResponder) chunk(text string) ollamaChunk {
	c := ollamaChunk{Model: o.model, CreatedAt: time.Now().UTC()}
	if o.chat {
		c.Message = &ollamaMessage{Role: "assistant", Content: text}
	} else {
		c.Response = &text
	}
	return c
}

func (o *ollamaResponder) first() any { return nil }

func (o *ollamaResponder) delta(text string, _ []tokenLogprob) any { return o.chunk(text) }

func (o *ollamaResponder) last(finish string, st engine.Stats) any {
	c := o.chunk("")
	o.done(&c, finish, st)
	return c
}

func (o *ollamaResponder) done(c *ollamaChunk, finish string, st engine.Stats) {
	c.ollamaDone = ollamaDone{Done: true, DoneReason: finish, TotalDuration: since(o.start), LoadDuration: o.load.Nanoseconds(),
		PromptEvalCount: st.PromptTokens, PromptEvalDuration: st.PromptTime.Nanoseconds(), EvalCount: st.GenTokens,
		EvalDuration: st.GenTime.Nanoseconds(), Dovetail: statsOf(st)}
	if !o.chat {
		c.Context = append(append([]int{}, o.prompt...), o.generated...)
	}
}

func (o *ollamaResponder) usage(engine.Stats) any { return nil }

func (o *ollamaResponder) whole(text string, _ []tokenLogprob, finish string, st engine.Stats) any {
	c := o.chunk(text)
	o.done(&c, finish, st)
	return c
}

func (o *ollamaResponder) failed(e *apiError) any {
	c := o.chunk("")
	c.Error, c.Done = e.Message, true
	return c
}
