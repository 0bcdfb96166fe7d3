package server

import (
	"dovetail/app/runner"
)

// A pulled model's params (its manifest's stop words, temperature...) are
// its defaults: a request's own fields and options win, as with ollama.

// modelParams are the params of the model a request names (nil: none).
func (s *Server) modelParams(name string) runner.Params {
	e, ok := s.fleet.Lookup(name)
	if !ok {
		return nil
	}
	return runner.Params(e.Params) // read with the list of models, not per request
}

// sets reports whether an OpenAI request sets what ollama's option names.
func (req *genRequest) sets(option string) bool {
	switch option {
	case "temperature":
		return req.Temperature != nil
	case "top_p":
		return req.TopP != nil
	case "top_k": // top_p 0 is top_k 1
		return req.TopP != nil && *req.TopP == 0
	case "seed":
		return req.Seed != nil
	case "stop":
		return nonEmpty(req.Stop)
	case "frequency_penalty":
		return req.FrequencyPenalty != nil
	case "presence_penalty":
		return req.PresencePenalty != nil
	case "num_predict":
		return true // max_tokens is the endpoint's own, with its own default
	}
	return false
}

// ollamaSets reports whether ollama's options set one; repeat_last_n 0
// sets every penalty (to none).
func ollamaSets(opts map[string]any) func(string) bool {
	return func(option string) bool {
		if _, ok := opts[option]; ok {
			return true
		}
		switch option {
		case "repeat_penalty", "frequency_penalty", "presence_penalty":
			v, ok := opts["repeat_last_n"].(float64)
			return ok && v == 0
		}
		return false
	}
}
