package runner

import (
	"fmt"

	"dovetail/device"
	"dovetail/models"
	"dovetail/offload"
)

// GPUPlan is the arithmetic of a placement on one GPU, as setup --json
// shows it: what the card has free, the reserve, what went there before
// the target's layers (the draft, then its trainer if room was left after
// the layers), what each layer takes, and why the next one did not go.
type GPUPlan struct {
	Device       string `json:"device"`
	FreeBytes    uint64 `json:"free_bytes"`
	ReserveBytes uint64 `json:"reserve_bytes"`
	DraftBytes   uint64 `json:"draft_bytes"`
	TrainerBytes uint64 `json:"trainer_bytes"`
	// HeadBytes is the final norm and the LM head as the card holds them,
	// and ScratchBytes every sequence's scratch: both go with the first
	// layer.
	HeadBytes    uint64 `json:"head_bytes"`
	ScratchBytes uint64 `json:"scratch_bytes"`
	// HeadLent says the layers use the draft's copy of the LM head on the
	// card: HeadBytes is then the final norm only.
	HeadLent bool `json:"head_lent,omitempty"`
	// Layers are the layers placed, the last first (the head's end), then
	// the next one, which did not go.
	Layers    []LayerBytes `json:"layers"`
	GPULayers int          `json:"gpu_layers"`
	// LayersBytes is the head, the scratch and the layers placed; LeftBytes
	// what the card has free beside everything placed and the reserve.
	LayersBytes uint64 `json:"layers_bytes"`
	LeftBytes   uint64 `json:"left_bytes"`
	// Stop says why no more layers went.
	Stop string `json:"stop"`
	// BandwidthGBs is the card's peak memory bandwidth, which the
	// prediction reads its layers at (0: unknown, no split predicted).
	BandwidthGBs float64 `json:"memory_bandwidth_gb_s,omitempty"`
}

// LayerBytes is one target layer on a GPU: its weights as the card holds
// them (the file's bytes for the formats it keeps in their blocks, and
// its norms) and its KV cache for every sequence at the context.
type LayerBytes struct {
	Layer        int    `json:"layer"`
	WeightsBytes uint64 `json:"weights_bytes"`
	KVBytes      uint64 `json:"kv_bytes"`
}

// layerArith is what the target's layers take on a GPU, counted as
// offload.Measure counts them: the head and the scratch that come with
// the first layer, then each layer, the last first.
type layerArith struct {
	head, scratch uint64
	headLent      bool // the LM head is the draft's: head is the final norm
	layers        []LayerBytes
}

// lendHead counts the layers with the draft's copy of m's LM head: only
// the final norm is theirs.
func (a *layerArith) lendHead(m *models.Llama) {
	a.head -= headBytes(m)
	a.headLent = true
}

// measureLayers counts m's layers on a GPU for seqs sequences of ctx
// positions.
func measureLayers(m *models.Llama, ctx, seqs int) (layerArith, error) {
	L := m.Config.Layers
	prev, err := offload.Measure(m, L, ctx, seqs, true)
	if err != nil {
		return layerArith{}, err
	}
	// Measure of no layers has uploaded the head: headBytes cannot fail.
	a := layerArith{head: headBytes(m) + 4*uint64(len(m.OutputNorm))}
	a.scratch = prev - min(prev, a.head)
	c := m.Config
	// A layer's keys and values as a GPU keeps them (device.AllocKV).
	kvc := device.NewCounter(true)
	device.AllocKV(kvc, 2*ctx*c.KVHeads*c.HeadDim*seqs)
	kv := kvc.Held()
	for i := L - 1; i >= 0; i-- {
		n, err := offload.Measure(m, i, ctx, seqs, true)
		if err != nil {
			return layerArith{}, err
		}
		a.layers = append(a.layers, LayerBytes{Layer: i, WeightsBytes: n - prev - kv, KVBytes: kv})
		prev = n
	}
	return a, nil
}

// bytes is what the last k layers take with the head and the scratch
// (0 for none).
func (a layerArith) bytes(k int) uint64 {
	if k == 0 {
		return 0
	}
	n := a.head + a.scratch
	for _, l := range a.layers[:k] {
		n += l.WeightsBytes + l.KVBytes
	}
	return n
}

// fit is how many of the last layers, at most most, fit in avail bytes,
// and what they take.
func (a layerArith) fit(avail uint64, most int) (int, uint64) {
	k := 0
	for k < min(most, len(a.layers)) && a.bytes(k+1) <= avail {
		k++
	}
	return k, a.bytes(k)
}

// stop says why no more than k layers went into avail bytes, at most most
// of them asked for.
func (a layerArith) stop(k int, avail uint64, most int) string {
	switch {
	case k == len(a.layers):
		return fmt.Sprintf("all %d layers fit", k)
	case k == most:
		return fmt.Sprintf("%d layers asked for", most)
	}
	next := a.layers[k]
	need := next.WeightsBytes + next.KVBytes
	what := fmt.Sprintf("layer %d (%s of weights, %s of KV cache)", next.Layer, HumanBytes(next.WeightsBytes), HumanBytes(next.KVBytes))
	if k == 0 {
		need += a.head + a.scratch
		head := "the head"
		if a.headLent {
			head = "the final norm"
		}
		what += fmt.Sprintf(" with %s (%s) and scratch (%s)", head, HumanBytes(a.head), HumanBytes(a.scratch))
	}
	return fmt.Sprintf("%s needs %s; %s left", what, HumanBytes(need), HumanBytes(avail-a.bytes(k)))
}

// plan is the arithmetic of k layers placed in avail bytes, what the
// card had free beside the draft, its trainer and the reserve.
func (a layerArith) plan(name string, free uint64, b Budget, k int, avail uint64, most int) *GPUPlan {
	p := &GPUPlan{Device: name, FreeBytes: free, ReserveBytes: gpuReserve, DraftBytes: b.gpuPart("draft"), TrainerBytes: b.gpuPart("trainer"),
		HeadBytes: a.head, ScratchBytes: a.scratch, HeadLent: a.headLent, GPULayers: k, LayersBytes: a.bytes(k), Stop: a.stop(k, avail, most)}
	p.Layers = a.layers[:min(k+1, len(a.layers))]
	p.LeftBytes = avail - p.LayersBytes
	return p
}
