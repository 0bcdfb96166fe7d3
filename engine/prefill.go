package engine

import "context"

// prefillChunk is the most prompt tokens one forward pass of the prefill
// runs before ctx is checked again: the CPU target's own batch (cpu's
// maxBatch), so that the checks cost it nothing, while a request
// cancelled during a long prompt (Ctrl-C, a client gone, a shutdown)
// stops within a batch instead of after the whole prompt.
const prefillChunk = 64

// prefill runs the prompt through t a chunk at a time and returns the last
// token's logits and, with features, every token's final hidden state. It
// returns ctx's error when ctx ends between chunks.
func prefill(ctx context.Context, t Target, prompt []int, features bool) (logits []float32, hidden [][]float32, err error) {
	for lo := 0; lo < len(prompt); lo += prefillChunk {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		chunk := prompt[lo:min(lo+prefillChunk, len(prompt))]
		if !features {
			if logits, err = t.Forward(chunk); err != nil {
				return nil, nil, err
			}
			continue
		}
		var h [][]float32
		if logits, h, err = t.ForwardFeatures(chunk); err != nil {
			return nil, nil, err
		}
		// The target may reuse its slice of rows on the next call.
		hidden = append(hidden, h...)
	}
	return logits, hidden, nil
}
