package server

import (
	"math"

	"dovetail/app/runner"
	"dovetail/engine"
)

// ollama's options for the penalty window, the frequency and presence
// penalties, typical-p and Mirostat, with their ranges. They sample as
// llama.cpp's (and so ollama's llama.cpp runner) do; current ollama has
// dropped Mirostat and ignores it, Dovetail still implements it.
var samplingOptions = map[string]struct {
	lo, hi  float64
	integer bool
	what    string
}{
	"repeat_last_n":     {-1, math.Inf(1), true, "an integer: -1 (the whole context), 0 (no penalties) or a number of tokens"},
	"frequency_penalty": {-2, 2, false, "between -2 and 2"},
	"presence_penalty":  {-2, 2, false, "between -2 and 2"},
	"typical_p":         {0, 1, false, "between 0 and 1 (0 or 1: off)"},
	"mirostat":          {0, 2, true, "0 (off), 1 or 2"},
	"mirostat_tau":      {0, math.Inf(1), false, "a number of bits, at least 0"},
	"mirostat_eta":      {0, math.Inf(1), false, "a learning rate, at least 0"},
}

// setSamplingOption checks option k (one of samplingOptions) and sets it.
func setSamplingOption(p *engine.SamplerParams, k string, raw any) *apiError {
	r := samplingOptions[k]
	v, ok := raw.(float64)
	if !ok || math.IsNaN(v) || math.IsInf(v, 0) {
		return invalid("options."+k, "invalid_type", "options.%s must be a number.", k)
	}
	if v < r.lo || v > r.hi || r.integer && v != math.Trunc(v) {
		return invalid("options."+k, "", "options.%s must be %s, got %v.", k, r.what, v)
	}
	runner.SetSamplerOption(p, k, v)
	return nil
}

// penaltyWindow applies repeat_last_n 0, ollama's empty penalty window,
// whatever order the options came in: no penalty then changes a logit.
// (The engine's RepeatLastN 0 is its default window of 64.)
func penaltyWindow(p *engine.SamplerParams, opts map[string]any) {
	if v, ok := opts["repeat_last_n"].(float64); ok && v == 0 {
		p.RepeatPenalty, p.FrequencyPenalty, p.PresencePenalty = 1, 0, 0
	}
}
