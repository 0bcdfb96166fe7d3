package engine

import "slices"

// defaultRepeatLastN is the penalty window when RepeatLastN is 0:
// llama.cpp's and ollama's default.
const defaultRepeatLastN = 64

// penalty is a token of the penalty window and how often it occurs there.
type penalty struct{ id, n int }

// penalizes reports whether any penalty is on.
func (p SamplerParams) penalizes() bool {
	return p.RepeatPenalty != 0 && p.RepeatPenalty != 1 || p.FrequencyPenalty != 0 || p.PresencePenalty != 0
}

// penalties are the tokens of the penalty window — the last RepeatLastN
// tokens of history (0: 64, -1: all of it), prompt included as llama.cpp's
// server feeds it to its penalty sampler — below n, ascending, each once
// with its count; none when every penalty is off. They depend on history
// alone, so a tree node, given its path as history, is penalized exactly
// as plain decoding penalizes that position.
func (s *Sampler) penalties(history []int, n int) []penalty {
	if !s.p.penalizes() || len(history) == 0 {
		return nil
	}
	last := len(history)
	switch w := s.p.RepeatLastN; {
	case w == 0:
		last = defaultRepeatLastN
	case w > 0:
		last = w
	}
	win := s.win[:0]
	for _, t := range history[max(0, len(history)-last):] {
		if t >= 0 && t < n {
			win = append(win, t)
		}
	}
	slices.Sort(win)
	s.win = win
	pen := s.pen[:0]
	for i := 0; i < len(win); {
		j := i + 1
		for j < len(win) && win[j] == win[i] {
			j++
		}
		pen = append(pen, penalty{id: win[i], n: j - i})
		i = j
	}
	s.pen = pen
	return pen
}

// penalize is llama.cpp's penalty of a logit whose token occurs n times in
// the window: the repeat penalty divides a positive logit and multiplies a
// negative one (so that both become less likely), then the frequency
// penalty is taken n times and the presence penalty once.
func (s *Sampler) penalize(v float32, n int) float32 {
	if r := s.p.RepeatPenalty; r != 0 && r != 1 {
		if v > 0 {
			v /= r
		} else {
			v *= r
		}
	}
	return v - (float32(n)*s.p.FrequencyPenalty + s.p.PresencePenalty)
}
