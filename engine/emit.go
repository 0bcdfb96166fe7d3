package engine

import "time"

// emitter hands tokens to the caller and decides when generation ends.
type emitter struct {
	st      *Stats
	stop    func(int) bool
	emit    func(int) error
	max     int
	history []int // prompt and generated tokens

	onRound   func(Round)
	onLogprob func(Logprob)
	topLP     int
	drafter   Drafter
	start     time.Time // of generation
	round     Round     // emitted since the last flush
}

// push emits tok, chosen from the logits row, unless it stops
// generation or the row is not numbers; done reports the end.
func (e *emitter) push(tok int, from Source, row []float32) (done bool, err error) {
	if err := checkFinite(row, len(e.history)); err != nil {
		return true, err
	}
	if e.stop != nil && e.stop(tok) {
		e.st.StopReason = "stop"
		return true, nil
	}
	e.st.GenTokens++
	e.history = append(e.history, tok)
	if e.onLogprob != nil {
		e.onLogprob(logprobOf(row, tok, e.topLP))
	}
	if err := e.emit(tok); err != nil {
		return true, err
	}
	if e.onRound != nil {
		e.round.Tokens = append(e.round.Tokens, tok)
		e.round.Sources = append(e.round.Sources, from)
	}
	if e.st.GenTokens >= e.max {
		e.st.StopReason = "length"
		return true, nil
	}
	return false, nil
}

// flush reports the tokens emitted since the last flush as a round.
func (e *emitter) flush() {
	if e.onRound == nil || len(e.round.Tokens) == 0 {
		return
	}
	r := e.round
	r.Tau = e.st.Tau()
	r.TokensPerSec = rate(e.st.GenTokens, time.Since(e.start))
	r.DraftVersion = versionOf(e.drafter)
	e.onRound(r)
	e.round.Tokens, e.round.Sources = e.round.Tokens[:0], e.round.Sources[:0]
}

// versionOf is the version of a drafter's weights, for drafters whose
// weights change (a Version method); else 0.
func versionOf(d Drafter) int {
	if v, ok := d.(interface{ Version() int }); ok {
		return v.Version()
	}
	return 0
}
