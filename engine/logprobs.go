package engine

import (
	"dovetail/engine/tree"
	"dovetail/internal/topk"
)

// Logprob is the target's log-probability of an emitted token — log
// softmax of the logits at its position, the model's own distribution
// before any sampling setting — and the most likely tokens there.
type Logprob struct {
	Token   int
	Logprob float64
	Top     []tree.Choice // most likely first; Request.TopLogprobs of them
}

// logprobOf computes a token's Logprob from the logits row it was chosen
// from, with the k most likely tokens (k ≥ 0).
func logprobOf(row []float32, tok, k int) Logprob {
	top := topk.LogProbs(nil, row, max(k, 1), 1)
	// log softmax(row)[i] = row[i] − lse, and the top token tells lse.
	lse := float64(row[top[0].Token]) - top[0].LogP
	return Logprob{Token: tok, Logprob: float64(row[tok]) - lse, Top: top[:k]}
}
