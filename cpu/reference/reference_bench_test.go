package reference

import (
	"testing"

	"dovetail/internal/golden"
	"dovetail/models"
)

// BenchmarkReferenceDecode is one decode step of the pure-Go reference on
// a real model, context kept under 64 positions.
func BenchmarkReferenceDecode(b *testing.B) {
	for _, name := range []string{"stories260K-f32.gguf", "tinystories656K-Q8_0.gguf"} {
		b.Run(name, func(b *testing.B) {
			m, err := models.LoadLlama(golden.ModelPath(name))
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			r := New(m, 1, 0)
			s := r.NewState()
			lg := make([]float32, m.Config.Vocab)
			for b.Loop() {
				if s.Cache.Len >= 64 {
					s.Cache.Len = 0
				}
				r.Forward(s, 5, lg, nil)
			}
		})
	}
}
