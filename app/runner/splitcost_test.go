package runner

import (
	"math"
	"strings"
	"testing"
	"time"

	"dovetail/app/runner/probe"
	"dovetail/app/runner/store"
	"dovetail/engine/plan"
	"dovetail/models/draft"
)

// cal7B is a calibration of a 7B on two threads of a desktop: a 150 ms
// decode step, verifying n tokens at 1 + n/40 steps, a draft step of
// 40 ms on the CPU; no GPU timed.
func cal7B() *Calibration {
	step := 150 * time.Millisecond
	verify := map[int]time.Duration{}
	for _, n := range profileSizes {
		verify[n] = step + time.Duration(n)*step/40
	}
	return &Calibration{Threads: 2, Profile: plan.Profile{Decode: step, Verify: verify, DecodeTokensPerSec: 1 / step.Seconds()},
		DraftStep: map[string]time.Duration{"cpu": 40 * time.Millisecond}, Plain: 6.5, PlainLow: 6.3, PlainHigh: 6.7}
}

// at is a prediction of the 7B with k layers on a GPU of bw bytes/s (0:
// none), the draft on the GPU where there is one, at τ (nil: its own).
func at(t *testing.T, k int, bw float64, tau []float64) Prediction {
	m := shapeModel(t, "llama-2-7b.Q4_K_M.gguf", 4096, 32, 32, 32, 11008, 32000, 4096, q4km)
	p := Placement{Threads: 2, DraftDevice: "cpu", TrainerDevice: "cpu", Device: "cpu", GPULayers: k}
	ask := predictAsk{m: m.Llama, tau: tau}
	if bw > 0 {
		ask.gpu = gpuSpeedOf(probe.GPU{Name: "card", MemoryBandwidthGBs: bw / 1e9})
		p.DraftDevice, p.Device = "card", "cuda:0"
	}
	pr, _ := predict(cal7B(), p, autoDraftOf(m, store.At(t.TempDir())), ask)
	return pr
}

// The split's plain speed: no layers on the GPU is today's prediction,
// every field; each more layer on a card faster than the CPU's memory is
// faster, and a faster card faster still; a card slower than the CPU's
// memory is slower than the CPU alone.
func TestSplitPrediction(t *testing.T) {
	m := shapeModel(t, "llama-2-7b.Q4_K_M.gguf", 4096, 32, 32, 32, 11008, 32000, 4096, q4km)
	ad := autoDraftOf(m, store.At(t.TempDir()))
	p := Placement{Threads: 2, DraftDevice: "cpu", TrainerDevice: "cpu", Device: "cpu"}
	today, _ := predict(cal7B(), p, ad, predictAsk{})
	zero, _ := predict(cal7B(), p, ad, predictAsk{m: m.Llama, gpu: &gpuSpeed{bandwidth: 448e9, h2d: 12e9, d2h: 12e9}})
	if today != zero || today.Plain != today.CPUOnly || today.SpeedupPlain != 1 {
		t.Errorf("no layers on the GPU: %+v, today %+v", zero, today)
	}
	prev := today.Plain
	for _, k := range []int{1, 10, 20, 32} {
		pr := at(t, k, 448e9, nil)
		if pr.Plain <= prev || pr.CPUOnly != today.CPUOnly || math.Abs(pr.SpeedupPlain-pr.Plain/pr.CPUOnly) > 1e-9 {
			t.Errorf("%d layers at 448 GB/s: %.2f tokens/s alone (%.2f×), fewer layers %.2f", k, pr.Plain, pr.SpeedupPlain, prev)
		}
		prev = pr.Plain
	}
	if slow, fast := at(t, 10, 448e9, nil), at(t, 10, 1e12, nil); fast.Plain <= slow.Plain {
		t.Errorf("10 layers: %.2f tokens/s at 1 TB/s, %.2f at 448 GB/s", fast.Plain, slow.Plain)
	}
	// The CPU reads the 4.3 GB a step in 150 ms: 29 GB/s. A card at 10
	// GB/s (7 at the kernels' efficiency) is slower.
	if pr := at(t, 10, 10e9, nil); pr.Plain >= today.Plain || pr.SpeedupPlain >= 1 {
		t.Errorf("10 layers at 10 GB/s: %.2f tokens/s alone, the CPU alone %.2f", pr.Plain, today.Plain)
	}
}

// The split's costs by hand: every layer and the head on the card cost
// their bytes at 70% of its bandwidth, 95 µs a layer, the hidden state up
// and the hidden state and logits back; the CPU's share is its layers'
// bytes over all.
func TestSplitProfileByHand(t *testing.T) {
	m := shapeModel(t, "llama-2-7b.Q4_K_M.gguf", 4096, 32, 32, 32, 11008, 32000, 4096, q4km).Llama
	cpu := cal7B().Profile
	g := gpuSpeed{bandwidth: 448e9, h2d: 12e9, d2h: 10e9}
	all := float64(offloadedFileBytes(m, 0)) // the layers and the head
	want := all/(0.7*448e9) + 32*95e-6 + 4096*4/12e9 + (4096+32000)*4/10e9
	if got := splitProfile(cpu, m, 32, g).Decode.Seconds(); math.Abs(got-want) > 1e-8 {
		t.Errorf("all 32 layers: T_T %.6f s, by hand %.6f", got, want)
	}
	layers := all - float64(tensorBytes(m.Output))
	k := 10
	share := (layers * 22 / 32) / all // the layers are alike
	gpu := (layers*10/32+float64(tensorBytes(m.Output)))/(0.7*448e9) + 10*95e-6 + 16*4096*4/12e9 + 16*(4096+32000)*4/10e9
	if got, want := splitProfile(cpu, m, k, g).Verify[16].Seconds(), share*cpu.Verify[16].Seconds()+gpu; math.Abs(got-want) > 1e-8 {
		t.Errorf("10 layers: T_V(16) %.6f s, by hand %.6f", got, want)
	}
	if p := splitProfile(cpu, m, 0, g); p.Decode != cpu.Decode || len(p.Verify) != len(cpu.Verify) {
		t.Errorf("no layers: %+v, the CPU's %+v", p, cpu)
	}
	// 65 rows take two passes over the card's weights.
	one, two := gpuForward(m, 32, g, 64), gpuForward(m, 32, g, 65)
	if more := all/(0.7*448e9) + 32*95e-6 + 4096*4/12e9 + (4096+32000)*4/10e9; math.Abs(two-one-more) > 1e-8 {
		t.Errorf("65 rows cost %.6f s more than 64, want a pass's and a row's %.6f", two-one, more)
	}
}

// A draft on a card no calibration timed costs its Q8_0 matrices and the
// target's head at the card's bandwidth, and a launch a block and one for
// the fusion; the prediction drafts with it, at the τ asked for.
func TestPlannedDraftAtTau(t *testing.T) {
	m := shapeModel(t, "llama-2-7b.Q4_K_M.gguf", 4096, 32, 32, 32, 11008, 32000, 4096, q4km)
	cfg := autoDraftOf(m, store.At(t.TempDir())).cfg
	g := gpuSpeed{bandwidth: 448e9, h2d: 12e9, d2h: 12e9}
	want := (float64(cfg.Params())*34/32+float64(tensorBytes(m.Llama.Output)))/(0.7*448e9) + float64(cfg.Blocks+1)*95e-6
	if got := gpuDraftStep(cfg, m.Llama, g).Seconds(); cfg.Kind != draft.DGF || math.Abs(got-want) > 1e-8 {
		t.Errorf("a %v draft's step %.6f s, by hand %.6f", cfg.Kind, got, want)
	}
	// The tree the planner prefers accepts the τ asked for: 3.25 at the
	// middle of 3 to 3.5.
	pr := at(t, 10, 448e9, []float64{3, 3.5})
	if pr.TauLow != 3 || pr.TauHigh != 3.5 || math.Abs(pr.Tau-3.25) > 0.01 || !(pr.Low < pr.WithDraft && pr.WithDraft < pr.High) || pr.WithDraft <= 1.5*pr.Plain ||
		math.Abs(pr.Speedup-pr.WithDraft/pr.CPUOnly) > 1e-9 || math.Abs(pr.SpeedupHigh-pr.High/pr.CPUOnly) > 1e-9 {
		t.Errorf("10 layers at τ 3–3.5: %+v", pr)
	}
	// A new draft without τ asked for: the target alone.
	if pr := at(t, 10, 448e9, nil); pr.WithDraft != pr.Plain || pr.TauHigh != 0 {
		t.Errorf("a new draft: %+v", pr)
	}
	// Higher acceptance, faster.
	if lo, hi := at(t, 10, 448e9, []float64{2, 2}), at(t, 10, 448e9, []float64{4, 4}); hi.WithDraft <= lo.WithDraft {
		t.Errorf("τ 4: %.2f tokens/s, τ 2: %.2f", hi.WithDraft, lo.WithDraft)
	}
}

// setup's --gpu-layers: a number caps the layers on the card (the
// arithmetic says so), 0 keeps them on the CPU; the card's bandwidth is
// in the arithmetic, and the prediction follows the layers.
func TestPlanFitAskedLayers(t *testing.T) {
	m := shapeModel(t, "llama-2-7b.Q4_K_M.gguf", 4096, 32, 32, 32, 11008, 32000, 4096, q4km)
	card := probe.GPU{Name: "card", VRAMTotalBytes: 8 << 30, VRAMFreeBytes: 8 << 30, MemoryBandwidthGBs: 448}
	machine := probe.Report{CPU: probe.CPU{Cores: 2, Threads: 2}, Memory: probe.Memory{AvailableBytes: 24 << 30}, GPUs: []probe.GPU{card}}
	st := store.At(t.TempDir())
	fit := func(want int) Fit {
		return PlanFitWith(m, machine, cal7B(), st, FitOptions{GPULayers: want, Tau: []float64{3, 3.5}})
	}
	ten, none, auto := fit(10), fit(0), fit(GPULayersAuto)
	if ten.Placement.GPULayers != 10 || len(ten.GPUs) != 1 || ten.GPUs[0].Stop != "10 layers asked for" || ten.GPUs[0].BandwidthGBs != 448 {
		t.Errorf("--gpu-layers 10: %d layers, %+v", ten.Placement.GPULayers, ten.GPUs)
	}
	if none.Placement.GPULayers != 0 || !strings.Contains(none.Reason, "--gpu-layers 0") || none.Predicted.Plain != none.Predicted.CPUOnly {
		t.Errorf("--gpu-layers 0: %d layers (%s), %+v", none.Placement.GPULayers, none.Reason, none.Predicted)
	}
	if auto.Placement.GPULayers <= 10 || !(none.Predicted.Plain < ten.Predicted.Plain && ten.Predicted.Plain < auto.Predicted.Plain) ||
		!(none.Predicted.Speedup < ten.Predicted.Speedup && ten.Predicted.Speedup < auto.Predicted.Speedup) {
		t.Errorf("0, 10, %d layers: alone %.1f, %.1f, %.1f; speedups %.2f, %.2f, %.2f", auto.Placement.GPULayers,
			none.Predicted.Plain, ten.Predicted.Plain, auto.Predicted.Plain, none.Predicted.Speedup, ten.Predicted.Speedup, auto.Predicted.Speedup)
	}
}

// --tau: one value or a range, each from 1 to the tree's most; anything
// else names the flag.
func TestParseTau(t *testing.T) {
	for in, want := range map[string][2]float64{"3.0,3.5": {3, 3.5}, "3-3.5": {3, 3.5}, " 3.2 ": {3.2, 3.2}, "1,9": {1, 9}, "3.0, 3.5": {3, 3.5}} {
		if got, err := ParseTau(in); err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("ParseTau(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "0.5", "10", "3.5,3.0", "3,", "1,2,3", "NaN", "-3", "3,inf"} {
		if got, err := ParseTau(in); err == nil || !strings.HasPrefix(err.Error(), "--tau ") {
			t.Errorf("ParseTau(%q) = %v, %v; want an error naming --tau", in, got, err)
		}
	}
}
