package runner

import (
	"slices"
	"testing"

	"dovetail/engine"
)

// A model's params fill in what the request leaves out, never what it
// sets; values of the wrong type or out of range are passed over.
func TestParamsApply(t *testing.T) {
	p := Params{"temperature": 0.2, "top_k": 30.0, "stop": []any{"<|eot|>", "User:"}, "num_predict": 50.0,
		"top_p": 7.0, "min_p": "high", "num_ctx": 4096.0, "repeat_penalty": 1.3}
	s := engine.SamplerParams{Temperature: 0.9, TopP: 1}
	stops := []string{"END"}
	maxTokens := 0
	p.Apply(&s, &stops, &maxTokens, func(k string) bool { return k == "temperature" })
	if s.Temperature != 0.9 {
		t.Errorf("the request's temperature became %v", s.Temperature)
	}
	if s.TopK != 30 || s.RepeatPenalty != 1.3 || maxTokens != 50 {
		t.Errorf("top_k %d, repeat_penalty %v, num_predict %d", s.TopK, s.RepeatPenalty, maxTokens)
	}
	if s.TopP != 1 || s.MinP != 0 {
		t.Errorf("top_p 7 or min_p \"high\" applied: %v, %v", s.TopP, s.MinP)
	}
	if !slices.Equal(stops, []string{"END", "<|eot|>", "User:"}) {
		t.Errorf("stops %q", stops)
	}
	// repeat_last_n 0 is ollama's "no penalties", whatever else sets one.
	s = engine.SamplerParams{}
	Params{"repeat_penalty": 1.5, "repeat_last_n": 0.0}.Apply(&s, nil, nil, func(string) bool { return false })
	if s.RepeatPenalty != 1 {
		t.Errorf("repeat_last_n 0 left repeat_penalty %v", s.RepeatPenalty)
	}
}
