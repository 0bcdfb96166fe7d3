package adapt

// Control decides when online adaptation collects records and trains, as
// TIDE does: a short and a long exponential moving average of τ; when the
// short one falls below the long one by more than Epsilon, the text has
// drifted away from what the draft knows, so collect and train; when
// training no longer beats the live draft, stop until the next drop.
type Control struct {
	ShortAlpha, LongAlpha float64 // EMA weights of a new round
	Epsilon               float64 // relative drop that starts collection
	MinRecords            int     // positions before a training run
	Patience              int     // failed evaluations before collection stops

	short, long float64
	rounds      int
	collecting  bool
	failures    int
}

// DefaultControl are starting settings, TIDE's in spirit: a short window of
// about 10 rounds, a long one of about 200, collection on a 5% drop,
// training every 256 positions. The adaptation harness is where they get
// measured.
func DefaultControl() *Control {
	return &Control{ShortAlpha: 0.1, LongAlpha: 0.005, Epsilon: 0.05, MinRecords: 256, Patience: 3, collecting: true}
}

// Observe adds a round's τ and returns whether records should be
// collected now.
func (c *Control) Observe(tau float64) bool {
	if c.rounds == 0 {
		c.short, c.long = tau, tau
	} else {
		c.short += c.ShortAlpha * (tau - c.short)
		c.long += c.LongAlpha * (tau - c.long)
	}
	c.rounds++
	if !c.collecting && c.short < c.long*(1-c.Epsilon) {
		c.collecting, c.failures = true, 0
	}
	return c.collecting
}

// Collecting reports whether records are being collected.
func (c *Control) Collecting() bool { return c.collecting }

// ShouldTrain reports whether enough records arrived for a training run.
func (c *Control) ShouldTrain(newRecords int) bool {
	return c.collecting && newRecords >= c.MinRecords
}

// Evaluated reports whether the last training run beat the live draft;
// after Patience runs in a row that did not, collection stops.
func (c *Control) Evaluated(better bool) {
	if better {
		c.failures = 0
		return
	}
	if c.failures++; c.failures >= c.Patience {
		c.collecting = false
	}
}

// EMAs returns the short and long averages of τ.
func (c *Control) EMAs() (short, long float64) { return c.short, c.long }
