package reference

import (
	"testing"

	"dovetail/internal/golden"
	"dovetail/models"
)

// runner runs the reference one token at a time, for the golden checks.
func runner(m *models.Llama) golden.Runner {
	r := New(m, 2, 0)
	s := r.NewState()
	logits := make([]float32, m.Config.Vocab)
	hidden := make([]float32, m.Config.Hidden)
	return func(tok int) ([]float32, []float32, error) {
		return logits, hidden, r.Forward(s, tok, logits, hidden)
	}
}

func TestReferenceGolden(t *testing.T) { golden.Check(t, runner) }
