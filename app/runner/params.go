package runner

import (
	"maps"
	"math"
	"path/filepath"
	"slices"

	"dovetail/app/runner/pull"
	"dovetail/engine"
)

// Params are a model's own defaults, by ollama's option names: a pulled
// model's manifest params (stop words, temperature, top_k...). Every
// front end applies them through Apply, under what a request or a flag
// sets, as ollama does.
type Params map[string]any

// appliedParams are the options Apply knows; others a manifest may hold
// (num_ctx, num_gpu, ...) say how ollama would load the model and are left
// to the flags.
var appliedParams = map[string]bool{"stop": true, "temperature": true, "top_k": true, "top_p": true, "min_p": true,
	"typical_p": true, "repeat_penalty": true, "repeat_last_n": true, "frequency_penalty": true, "presence_penalty": true,
	"mirostat": true, "mirostat_tau": true, "mirostat_eta": true, "seed": true, "num_predict": true}

// ModelParams are the params of the model whose file is path, pulled into
// dir (the user's models folder when ""); nil for any other file.
func ModelParams(dir, path string) Params {
	if path == "" {
		return nil
	}
	ms, err := pull.List(dir) // "" is the user's models folder
	if err != nil {
		return nil
	}
	want, _ := filepath.Abs(path)
	for _, m := range ms {
		if got, _ := filepath.Abs(m.Path); got == want && len(m.Params) > 0 {
			return Params(m.Params)
		}
	}
	return nil
}

// Apply sets in s, stops and maxTokens the params that set reports the
// request did not set; a value of the wrong type, or one that would put
// the sampler out of range, is passed over.
func (p Params) Apply(s *engine.SamplerParams, stops *[]string, maxTokens *int, set func(option string) bool) {
	keys := slices.Sorted(maps.Keys(p))
	// ollama's repeat_last_n 0 turns the penalties off whatever sets
	// them: it goes last.
	if i := slices.Index(keys, "repeat_last_n"); i >= 0 {
		keys = append(append(keys[:i:i], keys[i+1:]...), "repeat_last_n")
	}
	for _, k := range keys {
		v := p[k]
		if !appliedParams[k] || set(k) {
			continue
		}
		if k == "stop" {
			if stops != nil {
				*stops = append(*stops, stopWords(v)...)
			}
			continue
		}
		f, ok := v.(float64)
		if !ok {
			continue
		}
		if k == "num_predict" {
			if maxTokens != nil && f > 0 {
				*maxTokens = int(f)
			}
			continue
		}
		was := *s
		SetSamplerOption(s, k, f)
		if s.Validate() != nil {
			*s = was
		}
	}
}

func stopWords(v any) []string {
	var out []string
	switch t := v.(type) {
	case string:
		out = append(out, t)
	case []any:
		for _, w := range t {
			if s, ok := w.(string); ok && s != "" {
				out = append(out, s)
			}
		}
	case []string:
		out = append(out, t...)
	}
	return out
}

// SetSamplerOption sets ollama's sampling option k (a request's, or a
// model's params) to v in s; false: k is not one. repeat_last_n 0 is
// ollama's empty window, which turns every penalty off: the engine's 0
// is its default window of 64 tokens.
func SetSamplerOption(s *engine.SamplerParams, k string, v float64) bool {
	switch k {
	case "temperature":
		s.Temperature = float32(v)
	case "top_k":
		s.TopK = int(v)
	case "top_p":
		s.TopP = float32(v)
	case "min_p":
		s.MinP = float32(v)
	case "typical_p":
		s.TypicalP = float32(v)
	case "repeat_penalty":
		s.RepeatPenalty = float32(v)
	case "repeat_last_n":
		if v == 0 {
			s.RepeatPenalty, s.FrequencyPenalty, s.PresencePenalty = 1, 0, 0
		} else {
			// Past the whole context any window is the whole context.
			s.RepeatLastN = int(min(max(v, -1), math.MaxInt32))
		}
	case "frequency_penalty":
		s.FrequencyPenalty = float32(v)
	case "presence_penalty":
		s.PresencePenalty = float32(v)
	case "mirostat":
		s.Mirostat = int(v)
	case "mirostat_tau":
		s.MirostatTau = float32(v)
	case "mirostat_eta":
		s.MirostatEta = float32(v)
	case "seed":
		if v >= 0 {
			s.Seed = uint64(v)
		}
	default:
		return false
	}
	return true
}
