package runner

import (
	"context"

	"dovetail/engine"
)

// EmbedTokens are the tokens an embedding of text reads: the model's BOS
// (and EOS) added as its tokenizer says, special tokens in the text
// parsed, as llama.cpp's llama-embedding tokenizes.
func (m *Model) EmbedTokens(text string) []int { return m.Tok.Encode(text, true, true) }

// Embed is the embedding of tokens on the slot (engine.Embed): the mean
// of their final hidden states, L2-normalised, Config().Hidden long. It
// runs as a generation does, one at a time on the slot, and may use the
// slot's whole context.
func (s *Slot) Embed(ctx context.Context, tokens []int) ([]float32, error) {
	defer s.r.generating()()
	var out []float32
	err := s.onTarget(func() (err error) {
		out, err = engine.Embed(ctx, s.target, tokens)
		return err
	}, func() bool { return true })
	return out, err
}
