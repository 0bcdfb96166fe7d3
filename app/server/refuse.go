package server

import (
	"bytes"
	"encoding/json"
)

// unsupported are the request fields of OpenAI's API that Dovetail does
// not implement. Clients send many fields with their defaults; a field is
// refused only when its value asks for something the answer would not do,
// never ignored in silence. web_search_options asks for a web search by
// being there at all (even {}), as OpenAI's API answers it for a model
// that cannot search: refused unless null.
type unsupported struct {
	Tools            json.RawMessage `json:"tools"`
	ToolChoice       json.RawMessage `json:"tool_choice"`
	Functions        json.RawMessage `json:"functions"`
	FunctionCall     json.RawMessage `json:"function_call"`
	ResponseFormat   json.RawMessage `json:"response_format"`
	LogitBias        json.RawMessage `json:"logit_bias"`
	BestOf           *int64          `json:"best_of"`
	Echo             *bool           `json:"echo"`
	Suffix           json.RawMessage `json:"suffix"`
	Audio            json.RawMessage `json:"audio"`
	Modalities       []string        `json:"modalities"`
	Prediction       json.RawMessage `json:"prediction"`
	ReasoningEffort  json.RawMessage `json:"reasoning_effort"`
	WebSearchOptions json.RawMessage `json:"web_search_options"`
}

// refuse names the first field whose value Dovetail cannot honour.
func (u *unsupported) refuse(chat bool) *apiError {
	no := func(field, what string) *apiError {
		return invalid(field, "unsupported_parameter", "'%s' is not supported by this server: %s.", field, what)
	}
	switch {
	case nonEmpty(u.Tools):
		return no("tools", "the model cannot call tools here")
	case nonEmpty(u.Functions):
		return no("functions", "the model cannot call functions here")
	case nonEmpty(u.ToolChoice) && !isString(u.ToolChoice, "none", "auto"):
		return no("tool_choice", "the model cannot call tools here")
	case nonEmpty(u.FunctionCall) && !isString(u.FunctionCall, "none", "auto"):
		return no("function_call", "the model cannot call functions here")
	case nonEmpty(u.ResponseFormat) && !isTextFormat(u.ResponseFormat):
		return no("response_format", "only text is produced (no JSON mode or schema)")
	case nonEmpty(u.LogitBias):
		return no("logit_bias", "logits cannot be biased")
	case u.BestOf != nil && *u.BestOf != 1:
		return no("best_of", "one completion is generated")
	case u.Echo != nil && *u.Echo:
		return no("echo", "the prompt is not repeated in the answer")
	case nonEmpty(u.Suffix) && !isString(u.Suffix, ""):
		return no("suffix", "text after the completion (fill in the middle) is not supported")
	case nonEmpty(u.Audio):
		return no("audio", "only text is produced")
	case len(u.Modalities) > 0 && !(len(u.Modalities) == 1 && u.Modalities[0] == "text"):
		return no("modalities", "only text is produced")
	case nonEmpty(u.Prediction):
		return no("prediction", "predicted outputs are not supported (speculative decoding drafts on its own)")
	case nonEmpty(u.ReasoningEffort):
		return no("reasoning_effort", "the model does not reason on request")
	case !isNull(u.WebSearchOptions):
		return no("web_search_options", "there is no web search here")
	}
	return nil
}

// nonEmpty reports a field that is there and says something: not null,
// not an empty array or object.
func nonEmpty(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	switch string(t) {
	case "", "null", "[]", "{}":
		return false
	}
	return true
}

func isString(raw json.RawMessage, ok ...string) bool {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return false
	}
	for _, o := range ok {
		if s == o {
			return true
		}
	}
	return false
}

func isTextFormat(raw json.RawMessage) bool {
	var f struct {
		Type string `json:"type"`
	}
	return json.Unmarshal(raw, &f) == nil && f.Type == "text"
}
