package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"dovetail/engine"
)

// chatSettings are what /set changes, and what /load keeps.
type chatSettings struct {
	params     engine.SamplerParams
	seed       int64 // as set: -1 draws params.Seed at random
	numPredict int   // most tokens of a reply (-1: until the context ends)
	numCtx     int   // the context length (0: the model's)
	system     string
	wrap       bool // break long lines between words (a terminal only)
	// set are the parameters /set set: the model's own defaults do not
	// override them.
	set map[string]bool
}

// chatParam is one of /set parameter's names, as ollama's.
type chatParam struct {
	name, help string
	get        func(*chatSettings) string
	set        func(*chatSettings, string) error
}

// chatParams are the parameters of /set parameter, in /show's order.
var chatParams = []chatParam{
	{"temperature", "0: greedy", func(s *chatSettings) string { return fmtFloat(s.params.Temperature) },
		floatParam(func(s *chatSettings) *float32 { return &s.params.Temperature }, 0, 100)},
	{"top_k", "0: off", func(s *chatSettings) string { return strconv.Itoa(s.params.TopK) },
		intParam(func(s *chatSettings) *int { return &s.params.TopK }, 0, math.MaxInt32)},
	{"top_p", "1: off", func(s *chatSettings) string { return fmtFloat(s.params.TopP) },
		floatParam(func(s *chatSettings) *float32 { return &s.params.TopP }, 0, 1)},
	{"min_p", "0: off", func(s *chatSettings) string { return fmtFloat(s.params.MinP) },
		floatParam(func(s *chatSettings) *float32 { return &s.params.MinP }, 0, 1)},
	{"repeat_penalty", "1: off", func(s *chatSettings) string { return fmtFloat(s.params.RepeatPenalty) },
		floatParam(func(s *chatSettings) *float32 { return &s.params.RepeatPenalty }, 0, 100)},
	{"seed", "-1: random", func(s *chatSettings) string {
		if s.seed < 0 {
			return fmt.Sprintf("-1 (drew %d)", s.params.Seed)
		}
		return strconv.FormatInt(s.seed, 10)
	}, setSeed},
	{"num_predict", "-1: until the context ends", func(s *chatSettings) string { return strconv.Itoa(s.numPredict) }, setNumPredict},
	{"num_ctx", "0: the model's; reloads the model, keeping the conversation", func(s *chatSettings) string { return strconv.Itoa(s.numCtx) },
		intParam(func(s *chatSettings) *int { return &s.numCtx }, 0, math.MaxInt32)},
}

// paramNames lists the parameters' names.
func paramNames() string {
	var names []string
	for _, p := range chatParams {
		names = append(names, p.name)
	}
	return strings.Join(names, ", ")
}

// setParam sets the parameter name to value, or says in one line what
// is wrong and changes nothing.
func (s *chatSettings) setParam(name, value string) error {
	for _, p := range chatParams {
		if p.name == name {
			next := *s
			if err := p.set(&next, value); err != nil {
				return fmt.Errorf("%s: %v", name, err)
			}
			*s = next
			if s.set == nil {
				s.set = map[string]bool{}
			}
			s.set[name] = true
			return nil
		}
	}
	return fmt.Errorf("unknown parameter %q (the parameters: %s)", name, paramNames())
}

func floatParam(field func(*chatSettings) *float32, lo, hi float64) func(*chatSettings, string) error {
	return func(s *chatSettings, v string) error {
		f, err := strconv.ParseFloat(v, 32)
		if err != nil || math.IsNaN(f) {
			return fmt.Errorf("%q is not a number", v)
		}
		if f < lo || f > hi {
			return fmt.Errorf("%s out of range [%s, %s]", v, fmtFloat(float32(lo)), fmtFloat(float32(hi)))
		}
		*field(s) = float32(f)
		return nil
	}
}

func intParam(field func(*chatSettings) *int, lo, hi int) func(*chatSettings, string) error {
	return func(s *chatSettings, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", v)
		}
		if n < lo || n > hi {
			return fmt.Errorf("%d out of range [%d, %d]", n, lo, hi)
		}
		*field(s) = n
		return nil
	}
}

func setSeed(s *chatSettings, v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", v)
	}
	if n < -1 {
		return fmt.Errorf("%d must be -1 (random) or at least 0", n)
	}
	s.seed, s.params.Seed = n, uint64(n)
	if n < 0 {
		s.params.Seed = uint64(time.Now().UnixNano())
	}
	return nil
}

func setNumPredict(s *chatSettings, v string) error {
	n, err := strconv.Atoi(v)
	if err != nil {
		return fmt.Errorf("%q is not a whole number", v)
	}
	if n < -1 || n == 0 {
		return fmt.Errorf("%d must be -1 (until the context ends) or at least 1", n)
	}
	s.numPredict = n
	return nil
}

// maxTokens is the runner's limit of a reply's tokens.
func (s *chatSettings) maxTokens() int {
	if s.numPredict < 0 {
		return 0
	}
	return s.numPredict
}

func fmtFloat(f float32) string { return strconv.FormatFloat(float64(f), 'g', -1, 32) }
