package server

import (
	"encoding/json"

	"dovetail/engine"
	"dovetail/models/tokenizer"
)

// tokenLogprob is a token's logprob as OpenAI's chat API writes it: the
// token's text and bytes, its log-probability under the target's own
// distribution, and the most likely tokens at its position.
type tokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float64      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []topLogprob `json:"top_logprobs"`
}

type topLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

func bytesOf(s string) []int {
	out := make([]int, len(s))
	for i := range len(s) {
		out[i] = int(s[i])
	}
	return out
}

func tokenLogprobOf(tok *tokenizer.Tokenizer, lp engine.Logprob) tokenLogprob {
	piece := tok.Piece(lp.Token)
	t := tokenLogprob{Token: piece, Logprob: lp.Logprob, Bytes: bytesOf(piece), TopLogprobs: []topLogprob{}}
	for _, c := range lp.Top {
		p := tok.Piece(c.Token)
		t.TopLogprobs = append(t.TopLogprobs, topLogprob{Token: p, Logprob: c.LogP, Bytes: bytesOf(p)})
	}
	return t
}

// maxTopLogprobs is OpenAI's bound (chat: 20; completions: 5).
const (
	maxTopLogprobs           = 20
	maxCompletionTopLogprobs = 5
)

// parseLogprobs reads chat's logprobs (a boolean) and top_logprobs, or
// completions' logprobs (the number of alternatives).
func parseLogprobs(req *genRequest, j *job) *apiError {
	if isNull(req.Logprobs) {
		if req.TopLogprobs != nil && *req.TopLogprobs > 0 {
			return invalid("top_logprobs", "", "top_logprobs needs logprobs to be true.")
		}
		return nil
	}
	if j.chat {
		var on bool
		if err := json.Unmarshal(req.Logprobs, &on); err != nil {
			return invalid("logprobs", "invalid_type", "logprobs must be a boolean.")
		}
		j.logprobs = on
		if req.TopLogprobs != nil {
			if *req.TopLogprobs < 0 || *req.TopLogprobs > maxTopLogprobs {
				return invalid("top_logprobs", "", "top_logprobs must be between 0 and %d, got %d.", maxTopLogprobs, *req.TopLogprobs)
			}
			if !on && *req.TopLogprobs > 0 {
				return invalid("top_logprobs", "", "top_logprobs needs logprobs to be true.")
			}
			j.topLogprobs = int(*req.TopLogprobs)
		}
		return nil
	}
	var n int
	if err := json.Unmarshal(req.Logprobs, &n); err != nil || n < 0 || n > maxCompletionTopLogprobs {
		return invalid("logprobs", "", "logprobs must be a whole number between 0 and %d.", maxCompletionTopLogprobs)
	}
	j.logprobs, j.topLogprobs = true, n
	return nil
}

// chatLogprobs is a chat choice's logprobs.
type chatLogprobs struct {
	Content []tokenLogprob `json:"content"`
}

// textLogprobs is a completion choice's logprobs, the legacy layout.
type textLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float64            `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

func textLogprobsOf(lps []tokenLogprob, offset int) *textLogprobs {
	t := &textLogprobs{Tokens: []string{}, TokenLogprobs: []float64{}, TopLogprobs: []map[string]float64{}, TextOffset: []int{}}
	for _, lp := range lps {
		t.Tokens = append(t.Tokens, lp.Token)
		t.TokenLogprobs = append(t.TokenLogprobs, lp.Logprob)
		top := map[string]float64{}
		for _, c := range lp.TopLogprobs {
			top[c.Token] = c.Logprob
		}
		t.TopLogprobs = append(t.TopLogprobs, top)
		t.TextOffset = append(t.TextOffset, offset)
		offset += len(lp.Token)
	}
	return t
}
