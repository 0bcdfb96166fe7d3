package plan

import "time"

// Profile is what a target costs on this machine: the numbers the cost
// model T = (depth·T_D + T_V(γ)) / τ is made of.
type Profile struct {
	PrefillTokensPerSec float64
	DecodeTokensPerSec  float64
	// Decode is T_T, one ordinary decode step.
	Decode time.Duration
	// Verify[n] is T_V(n), one forward over n tree nodes.
	Verify map[int]time.Duration
}

// VerifyRatio is T_V(n)/T_T.
func (p Profile) VerifyRatio(n int) float64 {
	return float64(p.Verify[n]) / float64(p.Decode)
}
