package engine_test

import (
	"context"
	"errors"
	"testing"

	"dovetail/engine"
	"dovetail/engine/enginetest"
)

// cancelling is a target that cancels the request at its first forward.
type cancelling struct {
	*enginetest.Markov
	forwards int
	cancel   context.CancelFunc
}

func (c *cancelling) Forward(tokens []int) ([]float32, error) {
	c.forwards++
	c.cancel()
	return c.Markov.Forward(tokens)
}

// A request cancelled during a long prompt's prefill stops after the
// batch under way, not after the whole prompt.
func TestPrefillStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	target := &cancelling{Markov: enginetest.NewMarkov(16, 1, 1), cancel: cancel}
	prompt := make([]int, 1000)
	for i := range prompt {
		prompt[i] = i % 16
	}
	emitted := 0
	st, err := engine.Generate(ctx, target, engine.Request{Prompt: prompt, MaxTokens: 8},
		func(int) error { emitted++; return nil })
	if !errors.Is(err, context.Canceled) || st.StopReason != "cancelled" {
		t.Fatalf("Generate: %v, stop reason %q; want context.Canceled, cancelled", err, st.StopReason)
	}
	if target.forwards != 1 || target.Len() >= len(prompt) || emitted != 0 {
		t.Errorf("%d forwards ran %d of %d prompt tokens and %d tokens were emitted; want one batch, none emitted",
			target.forwards, target.Len(), len(prompt), emitted)
	}
}
