package draft

// Window is a stretch of text with the target's features, what a draft
// trains and is scored on: Tokens x_0..x_T and Features f_0..f_T, the
// target's final hidden states (after its final norm) at those positions.
// Draft position t reads (f_t, x_{t+1}) and learns to predict f_{t+1},
// whose LM-head logits give x_{t+2}. Both the adaptation loop, which
// collects windows, and the devices, which train on them, use this type.
type Window struct {
	Tokens   []int
	Features [][]float32
}

// Score is how well a draft does on windows.
type Score struct {
	Loss float64 // the training loss, as optimized
	Top1 float64 // share of positions whose most likely token is the target's
	// Tau is the simulated acceptance length of a greedy chain: 1 + the
	// mean number of leading draft steps whose top token is the target's.
	Tau float64
}
