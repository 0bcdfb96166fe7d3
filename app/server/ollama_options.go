package server

import (
	"math"
)

// integerOptions are ollama's options that count something: ollama
// truncates 3.7 to 3 without a word; here it is a 400 naming the option,
// as OpenAI's API answers max_tokens 3.7.
var integerOptions = []string{"num_predict", "top_k", "seed", "num_ctx"}

// checkIntegers refuses a fractional value of an integer option (other
// types are refused where the options are read).
func checkIntegers(opts map[string]any) *apiError {
	for _, k := range integerOptions {
		if v, ok := opts[k].(float64); ok && v != math.Trunc(v) {
			return invalid("options."+k, "invalid_type", "options.%s must be an integer, got %v.", k, v)
		}
	}
	return nil
}
