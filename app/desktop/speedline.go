package desktop

import (
	"fmt"
	"strconv"
	"strings"

	"dovetail/app/runner"
	"dovetail/internal/plural"
)

// specOffWords is what a reply says when the planner kept drafting off:
// a ratio below 1 would tell the user that speculation slows them down,
// when it did not run.
const specOffWords = "speculation off: the target alone is faster for this model"

// speculationWords is how a reply's speculation went in words: nothing
// without a draft; speculation off when the planner decoded plainly for
// most of the reply; else its rounds, τ, and the comparison with the
// target alone as measured on this machine (baseline, tokens/s).
func speculationWords(s *MsgStats) string {
	switch {
	case !s.Drafted:
		return ""
	case s.Rounds == 0 && s.PlainSteps == 0:
		return "" // too short to say
	case s.Rounds == 0:
		return specOffWords
	case s.PlainSteps > s.Rounds:
		return fmt.Sprintf("%s (%s to keep measuring, τ %.2f)", specOffWords, plural.Of(s.Rounds, "trial round"), s.Tau)
	}
	line := fmt.Sprintf("%s, τ %.2f", plural.Of(s.Rounds, "round"), s.Tau)
	if s.DraftVersion > 0 {
		line += fmt.Sprintf(", drafted by version %d", s.DraftVersion)
	}
	switch ratio := s.TokensPerSec / s.Baseline; {
	case s.Baseline <= 0:
	case ratio >= 1:
		line += fmt.Sprintf(" · %.2f× the target alone (%s tokens/s on this machine)", ratio, formatRate(s.Baseline))
	default:
		line += fmt.Sprintf(" · not yet faster than the target alone (%s tokens/s on this machine): the draft is learning", formatRate(s.Baseline))
	}
	return line
}

// formatMs is a time in milliseconds as people read it: µs under a
// millisecond, one decimal under ten.
func formatMs(ms float64) string {
	switch {
	case ms < 1:
		return fmt.Sprintf("%.0f µs", ms*1000)
	case ms < 10:
		return fmt.Sprintf("%.1f ms", ms)
	case ms < 10000:
		return fmt.Sprintf("%.0f ms", ms)
	}
	return fmt.Sprintf("%.1f s", ms/1000)
}

// formatRate is a speed, tokens/s: one decimal under a hundred, whole
// numbers with thousands separated above.
func formatRate(v float64) string {
	if v < 100 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	s := strconv.FormatInt(int64(v+0.5), 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// predictionText is setup's predicted speed of a model in words: the
// target alone and with its draft, each with the range calibration's
// spread gives; where drafting does not pay, it says so.
func predictionText(pr runner.Prediction) string {
	if pr.Plain <= 0 {
		return "not calibrated: no prediction"
	}
	alone := fmt.Sprintf("%s tokens/s alone", formatRate(pr.Plain))
	if pr.WithDraft <= pr.Plain {
		return fmt.Sprintf("%s (%s–%s); with the draft as it is today the planner keeps speculation off: the target alone is faster for this model until the draft learns",
			alone, formatRate(pr.Low), formatRate(pr.High))
	}
	return fmt.Sprintf("%s → %s with the draft as it is today (%s–%s)", alone, formatRate(pr.WithDraft), formatRate(pr.Low), formatRate(pr.High))
}
