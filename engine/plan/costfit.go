package plan

import (
	"math"
	"slices"

	"gonum.org/v1/gonum/stat"
)

// costFit learns what a target's forwards cost from the forwards a run
// makes: T(n) = a + b·n seconds for n nodes, a line fitted to recent
// observations (verification is one pass over the weights, whose cost
// barely grows with the rows, plus work per row). It stands in for a
// profile until one is measured.
type costFit struct {
	n, t    []float64 // the newest observations, a ring
	next    int
	added   int // observations since the last fit
	a, b    float64
	fitted  bool
	changed bool
}

// refitEvery is how many observations wait for the next fit once the line
// has settled: a fit costs microseconds, a tiny model's decode step not
// many more.
const refitEvery = 16

// costFitSamples bounds the observations kept: enough for a stable line,
// few enough that the fit follows the machine's load.
const costFitSamples = 256

// defaultVerifySlope is the cost of each node beyond the first, relative
// to a decode step, before two sizes were observed: a conservative guess
// (verifying 16 nodes at 2.5 decode steps), which the fit replaces.
const defaultVerifySlope = 0.1

func (c *costFit) add(nodes int, seconds float64) {
	if len(c.n) < costFitSamples {
		c.n, c.t = append(c.n, float64(nodes)), append(c.t, seconds)
	} else {
		c.n[c.next], c.t[c.next] = float64(nodes), seconds
		c.next = (c.next + 1) % costFitSamples
	}
	c.added++
	if len(c.n) < 2*refitEvery || c.added >= refitEvery {
		c.fitted, c.added = false, 0
	}
}

// at is T(n) in seconds, 0 before any observation.
func (c *costFit) at(n int) float64 {
	if !c.fitted {
		c.fit()
	}
	return max(c.a+c.b*float64(n), 0)
}

// outlier is how many times the median a step may take and still count:
// beyond it the OS preempted the process, which says nothing of the target.
const outlier = 4

// typical is the mean of the samples within outlier times their median:
// a prediction of tokens/s is one of mean time, and the median is below
// the mean of a step's skewed times.
func typical(v []float64) float64 {
	slices.Sort(v)
	med := stat.Quantile(0.5, stat.Empirical, v, nil)
	var sum float64
	n := 0
	for _, x := range v {
		if x <= outlier*med {
			sum += x
			n++
		}
	}
	return sum / float64(n)
}

// fit fits the line: by least squares over the observations when they
// cover two sizes or more (a slope that is not positive, or an intercept
// below zero, falls back); from the typical decode step and the default
// slope otherwise.
func (c *costFit) fit() {
	c.fitted = true
	if len(c.n) == 0 {
		c.a, c.b = 0, 0
		return
	}
	lo := slices.Min(c.n)
	var base []float64
	for i, n := range c.n {
		if n == lo {
			base = append(base, c.t[i]/n)
		}
	}
	perNode := typical(base) // seconds per node at the smallest size
	a, b := perNode*(1-defaultVerifySlope), perNode*defaultVerifySlope
	if lo != slices.Max(c.n) {
		fa, fb := stat.LinearRegression(c.n, c.t, nil, false)
		if fb > 0 && fa > 0 && !math.IsNaN(fa+fb) {
			a, b = fa, fb
		}
	}
	c.changed = math.Abs(a+b-(c.a+c.b)) > 0.05*(c.a+c.b)
	c.a, c.b = a, b
}
