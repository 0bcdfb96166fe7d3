package cli

import (
	"github.com/spf13/cobra"

	"dovetail/app/runner"
	"dovetail/engine"
)

// A pulled model's params (its manifest's stop words, temperature...)
// are its defaults under the flags a user gives and, in the chat, the
// parameters /set sets (runner.Params).

// samplingFlags are the flags that set ollama's options.
var samplingFlags = map[string]string{"temperature": "temp", "top_k": "top-k", "top_p": "top-p", "min_p": "min-p",
	"repeat_penalty": "repeat-penalty", "seed": "seed", "num_predict": "n"}

// flagSets reports whether a flag given on c's command line sets option.
func flagSets(c *cobra.Command) func(option string) bool {
	return func(option string) bool {
		f := c.Flags().Lookup(samplingFlags[option])
		return f != nil && f.Changed
	}
}

// withModelParams is p, stops and maxTokens with the model's params
// applied where set does not report the user's own.
func withModelParams(params runner.Params, p engine.SamplerParams, maxTokens int, set func(string) bool) (engine.SamplerParams, []string, int) {
	var stops []string
	params.Apply(&p, &stops, &maxTokens, set)
	return p, stops, maxTokens
}

// setsParam reports a parameter the chat's user set, by flag or /set.
func (s *chatSession) setsParam(option string) bool {
	return s.set.set[option] || flagSets(s.c)(option)
}
