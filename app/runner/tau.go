package runner

import (
	"fmt"
	"strconv"
	"strings"

	"dovetail/engine/tree"
)

// maxTau is the most tokens a round of the server's tree accepts: every
// level and the target's own token.
var maxTau = float64(tree.Server.Depth + 2)

// ParseTau reads --tau: a draft's acceptance in tokens per round, one
// value ("3.2") or a range ("3.0,3.5" or "3.0-3.5"), each from 1 to
// maxTau, low first. It returns the low and high ends.
func ParseTau(s string) ([]float64, error) {
	bad := fmt.Errorf("--tau %q: want tokens per round from 1 to %g, one value or a range such as 3.0,3.5", s, maxTau)
	lo, hi, found := strings.Cut(strings.TrimSpace(s), ",")
	if !found {
		lo, hi, found = strings.Cut(lo, "-")
	}
	if !found {
		hi = lo
	}
	var t []float64
	for _, v := range []string{lo, hi} {
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || !(x >= 1 && x <= maxTau) {
			return nil, bad
		}
		t = append(t, x)
	}
	if t[0] > t[1] {
		return nil, fmt.Errorf("--tau %q: the low end (%g) is above the high end (%g)", s, t[0], t[1])
	}
	return t, nil
}
