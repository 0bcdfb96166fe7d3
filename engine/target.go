package engine

// Target is the model whose output Dovetail must reproduce exactly. The
// CPU implementation lives in package cpu; engine never names it.
//
// A Target holds one sequence: the committed tokens with their KV cache,
// and a tree of pending nodes after them that Extend builds and Commit
// resolves. Verifying a draft tree is one Extend of the whole tree; a draft
// model expanding its own tree calls Extend once per depth.
type Target interface {
	// Forward runs tokens after the committed ones, commits them, and
	// returns the logits of the last one. Pending nodes are dropped. The
	// slice is reused by the next call.
	Forward(tokens []int) ([]float32, error)
	// ForwardFeatures is Forward that also returns every token's final
	// hidden state (reused by the next call): the prompt's features for a
	// draft model that reads them.
	ForwardFeatures(tokens []int) (logits []float32, hidden [][]float32, err error)
	// Extend runs tree nodes after the committed tokens and the pending
	// nodes. parents[i] is an index into the pending nodes (earlier calls'
	// first, then this call's) or -1 for a child of the committed tokens. A
	// node sees the committed tokens and its ancestors; its position is
	// Len() + depth. It returns each new node's logits and final hidden
	// state (the feature a draft model reads), reused by the next call.
	Extend(tokens, parents []int) (logits, hidden [][]float32, err error)
	// Commit appends the pending nodes on path (a chain from a child of the
	// committed tokens down) to the committed tokens and drops the others.
	Commit(path []int) error
	// Len is the number of committed tokens.
	Len() int
	// Truncate forgets committed tokens from n on, and any pending nodes.
	Truncate(n int) error
	// Context is the most tokens the sequence can hold.
	Context() int
	// Vocab is the size of the logits.
	Vocab() int
}
