package runner

import (
	"math"
	"time"

	"dovetail/app/runner/probe"
	"dovetail/engine/plan"
	"dovetail/models"
	"dovetail/models/draft"
	"dovetail/offload"
	"dovetail/quant"
)

// What setup assumes of a GPU's share of a forward: the last measured
// figure where a card measured one, else issue #38's goal for the
// kernels. A prediction should not promise what no card has shown.
const (
	// gpuEfficiency is the share of a card's peak memory bandwidth its
	// layer kernels read weights at: issue #38's goal, 0.7, until the
	// block kernels are measured (BenchmarkCUDABlockProduct).
	gpuEfficiency = 0.7
	// gpuLayerLaunch is what a layer on a GPU costs beside reading its
	// weights: its kernels' launches and the waits between them, as the
	// device path last measured it (docs/measurements/gpu.md, "The CUDA
	// tests and the target's layers on a GPU, measured on one"), until a
	// card measures the fused, graphed path (BenchmarkCUDALayerStep).
	gpuLayerLaunch = 95 * time.Microsecond
	// assumedPCIeGBs is the rate of copies between the host and a card
	// whose copies no probe timed (a card planned for): what a PCIe 3.0
	// x16 link moves in practice, GB/s.
	assumedPCIeGBs = 12
)

// gpuSpeed is what a prediction knows of a GPU, bytes/s: its memory's
// peak bandwidth and its copies from and to the host.
type gpuSpeed struct {
	bandwidth float64
	h2d, d2h  float64
}

// gpuSpeedOf is g's speed as the probe (or a card planned for) gives it;
// nil where its memory bandwidth is unknown, as nothing then says what
// its share costs. Copies no probe timed go at assumedPCIeGBs.
func gpuSpeedOf(g probe.GPU) *gpuSpeed {
	if g.MemoryBandwidthGBs <= 0 {
		return nil
	}
	s := &gpuSpeed{bandwidth: g.MemoryBandwidthGBs * 1e9, h2d: assumedPCIeGBs * 1e9, d2h: assumedPCIeGBs * 1e9}
	if g.H2DGBs > 0 {
		s.h2d = g.H2DGBs * 1e9
	}
	if g.D2HGBs > 0 {
		s.d2h = g.D2HGBs * 1e9
	}
	return s
}

// read is how long the card takes to read n bytes of weights.
func (g gpuSpeed) read(n uint64) float64 {
	return float64(n) / (g.bandwidth * gpuEfficiency)
}

// splitProfile is the profile of m with its last k layers and its LM head
// on a GPU of speed g, from cpu, the profile of every layer on the CPU.
// Each cost is the CPU's share, cpu's scaled by the bytes of weights the
// CPU still reads, plus the GPU's (gpuForward). k ≤ 0 is cpu itself.
func splitProfile(cpu plan.Profile, m *models.Llama, k int, g gpuSpeed) plan.Profile {
	k = min(k, m.Config.Layers)
	if k <= 0 {
		return cpu
	}
	share := cpuShare(m, k)
	at := func(d time.Duration, n int) time.Duration {
		return time.Duration(share*float64(d) + gpuForward(m, k, g, n)*float64(time.Second))
	}
	out := plan.Profile{Decode: at(cpu.Decode, 1), Verify: make(map[int]time.Duration, len(cpu.Verify))}
	for n, d := range cpu.Verify {
		out.Verify[n] = at(d, n)
	}
	if out.Decode > 0 {
		out.DecodeTokensPerSec = 1 / out.Decode.Seconds()
	}
	return out // prefill is not predicted: nothing here reads it
}

// cpuShare is the share of m's weights, as its file holds them, the CPU
// still reads with the last k layers and the LM head on a GPU: the part
// of its profiled costs it keeps. Decoding reads every weight once a
// step, and verification's arithmetic grows with them alike.
func cpuShare(m *models.Llama, k int) float64 {
	L := m.Config.Layers
	var all, cpu uint64
	for i := range L {
		b := layerFileBytes(m, i)
		all += b
		if i < L-k {
			cpu += b
		}
	}
	all += tensorBytes(m.Output)
	if all == 0 {
		return 1
	}
	return float64(cpu) / float64(all)
}

// gpuForward is what the GPU's part of a forward over n rows costs,
// seconds: reading the last k layers' weights and the head (once for each
// pass of up to offload.LayerRows rows, as the CPU hands them over), each layer's
// launches, the rows' residual stream up and their hidden states and
// logits back over PCIe.
func gpuForward(m *models.Llama, k int, g gpuSpeed, n int) float64 {
	c := m.Config
	var weights uint64
	for i := c.Layers - k; i < c.Layers; i++ {
		weights += layerFileBytes(m, i)
	}
	weights += tensorBytes(m.Output)
	passes := float64((n + offload.LayerRows - 1) / offload.LayerRows)
	up := float64(n*c.Hidden*4) / g.h2d
	down := float64(n*(c.Hidden+c.Vocab)*4) / g.d2h
	return passes*(g.read(weights)+float64(k)*gpuLayerLaunch.Seconds()) + up + down
}

// gpuDraftStep is a step of a draft of shape cfg on a GPU of speed g,
// where none was timed (a card planned for): its matrices read in Q8_0
// (the copies a GPU drafts with) and the LM head it shares with m in its
// stored format, and a launch for each block and the fusion before them.
func gpuDraftStep(cfg draft.Config, m *models.Llama, g gpuSpeed) time.Duration {
	q8 := float64(quant.Q8_0.TypeSize()) / float64(quant.Q8_0.BlockSize()) // bytes a value
	weights := uint64(math.Ceil(float64(cfg.Params()) * q8))
	if cfg.Kind != draft.EAGLE3 {
		weights += tensorBytes(m.Output) // EAGLE-3's head is among its own
	}
	s := g.read(weights) + float64(cfg.Blocks+1)*gpuLayerLaunch.Seconds()
	return time.Duration(s * float64(time.Second))
}

// layerFileBytes is the bytes of layer i's matrices in m's file.
func layerFileBytes(m *models.Llama, i int) uint64 {
	l := &m.Layers[i]
	return tensorBytes(l.Q, l.K, l.V, l.O, l.Gate, l.Up, l.Down)
}

// tensorBytes is ts' bytes in their file (0 for a nil one).
func tensorBytes(ts ...*models.Tensor) uint64 {
	var n uint64
	for _, t := range ts {
		if t != nil {
			n += uint64(t.Rows) * uint64(t.RowBytes)
		}
	}
	return n
}
