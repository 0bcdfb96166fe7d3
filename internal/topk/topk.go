// Package topk ranks a draft model's logits: the k most likely tokens with
// their log-probabilities, which is all a draft tree needs of a
// distribution. The engine ranks with it, and so does the host device for
// drafts that rank their own outputs (on a GPU, a kernel does the same).
package topk

import (
	"math"
	"slices"

	"dovetail/internal/fastmath"
)

// Choice is a token and its log-probability.
type Choice struct {
	Token int
	LogP  float64
}

// LogProbs appends to dst the k most likely tokens of softmax(scale·logits)
// with their log-probabilities, most likely first; of equal logits the
// lower token comes first. scale·logits is rounded to float32, as a scaled
// copy of the logits would be.
func LogProbs(dst []Choice, logits []float32, k int, scale float32) []Choice {
	k = min(k, len(logits))
	if k <= 0 {
		return dst
	}
	dst = slices.Grow(dst, k)
	top := dst[len(dst):] // appends stay in dst's array
	mx := float32(math.Inf(-1))
	for _, v := range logits {
		mx = max(mx, v*scale)
	}
	var sum float64
	for i, v := range logits {
		v *= scale
		sum += float64(fastmath.Expf(v - mx))
		if len(top) == k && float64(v) <= top[k-1].LogP {
			continue
		}
		j := len(top)
		if j < k {
			top = append(top, Choice{})
		} else {
			j = k - 1
		}
		for j > 0 && float64(v) > top[j-1].LogP {
			top[j] = top[j-1]
			j--
		}
		top[j] = Choice{Token: i, LogP: float64(v)}
	}
	lse := float64(mx) + math.Log(sum)
	for i := range top {
		top[i].LogP -= lse
	}
	return dst[:len(dst)+len(top)]
}
