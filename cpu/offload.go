package cpu

// Offload is the part of a model another device runs (offload.Layers): its
// layers from From on, its final norm and LM head. Package cpu names no
// device: the runner wires one in.
type Offload struct {
	From int
	// NewSeq makes one sequence's part there, of ctx positions.
	NewSeq func(ctx int) (OffloadSeq, error)
}

// OffloadSeq is one sequence's offloaded layers with their KV cache (see
// offload.Seq): Forward takes a batch's residual stream after layer
// From−1 with the batch's positions and tree mask and gives back its final
// features and logits; Commit compacts accepted nodes as the CPU side does.
type OffloadSeq interface {
	Forward(x []float32, n int, pos []int, past, base int, mask []uint8, logitsFrom int, hidden, logits []float32) error
	Commit(past int, path []int) error
	Free()
}
