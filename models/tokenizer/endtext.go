package tokenizer

import "sort"

// EOGTexts are the vocabulary texts of the tokens that end generation
// ("<|end_story|>", "<|eot_id|>", ...), longest first. A model can write
// such a text out in ordinary tokens instead of emitting the token
// itself (the embedded TinyStories model spells "<|end_story|>" as "<|",
// "end", "_story", "|>" and only then emits EOS, as its training text
// did): generation that reaches one has ended just the same, and the text
// must not be shown.
func (t *Tokenizer) EOGTexts() []string {
	var out []string
	for id := range t.eog {
		if s := t.tokens[id]; s != "" {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if len(out[a]) != len(out[b]) {
			return len(out[a]) > len(out[b])
		}
		return out[a] < out[b]
	})
	return out
}
