package engine

// Target is the model whose output Dovetail must reproduce exactly. The
// CPU implementation lives in package cpu; engine never names it.
//
// A Target holds one sequence: the tokens committed so far and their KV
// cache.
type Target interface {
	// Forward runs tokens after the committed ones, commits them, and
	// returns the logits of the last one. The slice is reused by the next
	// call.
	Forward(tokens []int) ([]float32, error)
	// Len is the number of committed tokens.
	Len() int
	// Truncate forgets committed tokens from n on.
	Truncate(n int) error
	// Context is the most tokens the sequence can hold.
	Context() int
	// Vocab is the size of the logits.
	Vocab() int
}
