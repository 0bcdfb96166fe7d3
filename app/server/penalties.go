package server

import (
	"math"

	"dovetail/engine"
)

// penalties reads OpenAI's frequency_penalty and presence_penalty, in
// OpenAI's range [-2, 2]. The engine takes them as llama.cpp's server
// does: a token's logit loses count·frequency_penalty + presence_penalty
// for the times it occurs among the last 64 tokens, prompt included
// (OpenAI counts the completion's tokens only).
func (req *genRequest) penalties(p *engine.SamplerParams) *apiError {
	for _, f := range []struct {
		name string
		v    *float64
		to   *float32
	}{
		{"frequency_penalty", req.FrequencyPenalty, &p.FrequencyPenalty},
		{"presence_penalty", req.PresencePenalty, &p.PresencePenalty},
	} {
		if f.v == nil {
			continue
		}
		if v := *f.v; math.IsNaN(v) || v < -2 || v > 2 {
			return invalid(f.name, "", "%s must be between -2 and 2, got %v.", f.name, v)
		}
		*f.to = float32(*f.v)
	}
	return nil
}
