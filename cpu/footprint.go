package cpu

import (
	"dovetail/cpu/kernels"
	"dovetail/models"
	"dovetail/quant"
)

// Footprint is the memory, in bytes, a model takes on the CPU: what a
// memory budget counts before anything is allocated.
type Footprint struct {
	// Weights is what the forward pass reads, counted once however many
	// sequences share it: every tensor of the file (packed copies take the
	// place of the file's pages; an output matrix tied to the embeddings
	// is packed beside them).
	Weights uint64
	// Tables is the RoPE table of every position, shared too.
	Tables uint64
	// KV is one sequence's cache: f16 keys and values of every layer.
	KV uint64
	// Scratch is one sequence's batch memory at its largest (a pass of
	// maxBatch rows with its logits and per-thread attention scratch).
	Scratch uint64
}

// MeasureTarget is what m takes with sequences of ctx positions (≤ 0: the
// model's context length) on threads threads.
func MeasureTarget(m *models.Llama, ctx, threads int) Footprint {
	c := m.Config
	if ctx <= 0 {
		ctx = c.ContextLength
	}
	var fp Footprint
	if m.File != nil {
		for _, t := range m.File.Tensors {
			fp.Weights += t.Size
		}
	}
	if c.TiedOutput && m.Output != nil {
		fp.Weights += uint64(len(m.Output.Data))
	}
	fp.Tables = 2 * 4 * uint64(ctx) * uint64(c.RopeDim/2)
	fp.KV = KVBytes(c, ctx, c.Layers)
	fp.Scratch = scratchBytes(c, ctx, threads)
	return fp
}

// KVBytes is the KV cache of layers of c's layers for one sequence of ctx
// positions: keys and values in float16.
func KVBytes(c models.Config, ctx, layers int) uint64 {
	return 2 * 2 * uint64(layers) * uint64(ctx) * uint64(c.KVHeads*c.HeadDim)
}

// scratchBytes follows Seq.grow for a batch of maxBatch rows among as
// many pending ones.
func scratchBytes(c models.Config, ctx, threads int) uint64 {
	n, H, F, V := uint64(maxBatch), uint64(c.Hidden), uint64(c.FFN), uint64(c.Vocab)
	kv := uint64(c.KVHeads * c.HeadDim)
	wide := max(H, F)
	floats := n*H + n*wide + 2*n*F + 2*n*kv + n*H + n*V + 2*n*H // x, xb, hb, hb2, kk, vv, hidden, logits, qAll, attOut
	b := 4*floats + n*n                                         // and the mask
	for _, t := range []quant.Type{quant.F16, quant.BF16, quant.Q8_0, quant.Q4_K} {
		b += uint64(kernels.ActivationBytes(t, int(n*wide)))
	}
	b += 4 * uint64(threads) * uint64(max(kernels.AttentionScratch(ctx, int(n)), 64))
	return b
}
