package runner

import (
	"fmt"
	"strings"
	"testing"

	"dovetail/app/runner/probe"
	"dovetail/app/runner/store"
	"dovetail/models"
	"dovetail/models/gguf"
	"dovetail/quant"
)

// shapeModel is a model of a real shape whose tensors have sizes and no
// data: what the fit arithmetic reads. types gives each tensor's type by
// the end of its name (default Q4_K), as a Q4_K_M file mixes them.
func shapeModel(t *testing.T, name string, h, layers, heads, kv, ffn, vocab, ctx int, types map[string]quant.Type) *Model {
	t.Helper()
	f := &gguf.File{}
	tensor := func(n string, rows, cols int) *models.Tensor {
		typ := quant.Q4_K
		for suffix, ty := range types {
			if n == suffix || strings.HasSuffix(n, "."+suffix) {
				typ = ty
			}
		}
		rb, err := typ.RowSize(cols)
		if err != nil {
			t.Fatal(err)
		}
		f.Tensors = append(f.Tensors, gguf.TensorInfo{Name: n, Type: typ, Dims: []uint64{uint64(cols), uint64(rows)}, Size: uint64(rb * rows)})
		return &models.Tensor{Name: n, Type: typ, Rows: rows, Cols: cols, RowBytes: rb}
	}
	norm := func(n string) {
		f.Tensors = append(f.Tensors, gguf.TensorInfo{Name: n, Type: quant.F32, Size: uint64(4 * h)})
	}
	m := &models.Llama{Config: models.Config{Arch: "llama", Hidden: h, Layers: layers, Heads: heads, KVHeads: kv, HeadDim: h / heads,
		FFN: ffn, Vocab: vocab, ContextLength: ctx, RMSEps: 1e-5, RopeTheta: 10000, RopeDim: h / heads, RopeScale: 1}}
	m.TokenEmbd = tensor("token_embd.weight", vocab, h)
	for l := range layers {
		p := fmt.Sprintf("blk.%d.", l)
		ly := models.LlamaLayer{AttnNorm: make([]float32, h), FFNNorm: make([]float32, h)}
		ly.Q = tensor(p+"attn_q.weight", h, h)
		ly.K = tensor(p+"attn_k.weight", kv*h/heads, h)
		ly.V = tensor(p+"attn_v.weight", kv*h/heads, h)
		ly.O = tensor(p+"attn_output.weight", h, h)
		ly.Gate = tensor(p+"ffn_gate.weight", ffn, h)
		ly.Up = tensor(p+"ffn_up.weight", ffn, h)
		ly.Down = tensor(p+"ffn_down.weight", h, ffn)
		norm(p + "attn_norm.weight")
		norm(p + "ffn_norm.weight")
		m.Layers = append(m.Layers, ly)
	}
	norm("output_norm.weight")
	m.OutputNorm = make([]float32, h)
	m.Output = tensor("output.weight", vocab, h)
	m.File = f
	return &Model{Name: name, Llama: m, Fingerprint: strings.Repeat("f", 32)}
}

// q4km is a Q4_K_M file's mix: Q4_K, with Q6_K for attn_v, ffn_down and
// the output.
var q4km = map[string]quant.Type{"attn_v.weight": quant.Q6_K, "ffn_down.weight": quant.Q6_K, "output.weight": quant.Q6_K}

func partBytes(b Budget, name string) (uint64, string) {
	for _, p := range b.Parts {
		if p.Name == name {
			return p.Bytes, p.Device
		}
	}
	return 0, ""
}

// A 7B Q4_K_M on 16 GB of RAM with 10 GiB available and a 6 GB GPU (5.5
// GiB free): the whole context fits, but a new draft, which must learn,
// does not fit with its trainer anywhere: the target runs alone, 26 of
// its layers on the GPU (5 GiB beside the reserve: the head at 108 MB
// and scratch at 60 MB, then 197 MB a layer, 130 MB of weights and 67
// MB of keys and values in halves), and the CPU keeps the other 6 layers'
// cache. With 11 GiB (and 14, and 30) available the draft
// drafts on the GPU and trains on the CPU (4.7 GiB for its trainer, its
// AdamW moments in bfloat16).
func TestFit7BOn16GBAnd6GB(t *testing.T) {
	m := shapeModel(t, "llama-2-7b.Q4_K_M.gguf", 4096, 32, 32, 32, 11008, 32000, 4096, q4km)
	gpu6 := []probe.GPU{{Name: "RTX 2060", VRAMTotalBytes: 6 << 30, VRAMFreeBytes: 5632 << 20}}
	machine := probe.Report{CPU: probe.CPU{Cores: 8, Threads: 16}, Memory: probe.Memory{TotalBytes: 16e9, AvailableBytes: 10 << 30}, GPUs: gpu6}
	st := store.At(t.TempDir())
	f := PlanFit(m, machine, nil, st)
	// By hand: per layer Q, K, O at 4096·4096/256·144 bytes (Q4_K), V at
	// ·210 (Q6_K), gate and up at 11008·4096/256·144, down at ·210, two
	// norms of 4096 floats; the embeddings Q4_K, the output Q6_K.
	layer := uint64(3*4096*4096/256*144 + 4096*4096/256*210 + 2*11008*4096/256*144 + 11008*4096/256*210 + 2*4096*4)
	weights := 32*layer + 32000*4096/256*144 + 32000*4096/256*210 + 4096*4
	if got, _ := partBytes(f.Budget, "weights"); got+offloadedFileBytes(m.Llama, 32-f.Placement.GPULayers) != weights || weights != 4_335_460_352 {
		t.Errorf("weights %d on the CPU with %d layers on the GPU, by hand %d in all", got, f.Placement.GPULayers, weights)
	}
	// f16 keys and values of the CPU's 6 layers, 4096 positions, 4096 each.
	if got, _ := partBytes(f.Budget, "kv cache"); got != 2*2*6*4096*4096 {
		t.Errorf("kv cache %d, by hand %d", got, 2*2*6*4096*4096)
	}
	p := f.Placement
	if f.Verdict != FitsPartly || p.Threads != 8 || p.Ctx != 4096 || p.DraftDevice != "none" || p.GPULayers != 26 ||
		!strings.Contains(f.Reason, "no draft fits") || !strings.Contains(f.Reason, "last 26 of 32 layers on RTX 2060") {
		t.Errorf("10 GiB: verdict %q (%s), placement %+v", f.Verdict, f.Reason, p)
	}
	for _, gib := range []uint64{11, 14, 30} {
		machine.Memory.AvailableBytes = gib << 30
		f = PlanFit(m, machine, nil, st)
		p = f.Placement
		if f.Verdict != FitsPartly || p.DraftDevice != "RTX 2060" || p.TrainerDevice != "cpu" || p.Device != "cuda:0" {
			t.Errorf("%d GiB: verdict %q (%s), placement %+v", gib, f.Verdict, f.Reason, p)
		}
	}
	if _, dev := partBytes(f.Budget, "trainer"); dev != "cpu" {
		t.Errorf("trainer on %q", dev)
	}
	if f.Budget.GPU() > 5632<<20 || f.Budget.CPU() > 30<<30 {
		t.Errorf("over budget: %s on the GPU, %s on the CPU", HumanBytes(f.Budget.GPU()), HumanBytes(f.Budget.CPU()))
	}
}

// A 70B model does not fit in 14 GiB at any context: the verdict says so
// with the sizes.
func TestFitWillNotFit(t *testing.T) {
	m := shapeModel(t, "llama-2-70b.Q4_K_M.gguf", 8192, 80, 64, 8, 28672, 32000, 4096, q4km)
	machine := probe.Report{CPU: probe.CPU{Cores: 4}, Memory: probe.Memory{AvailableBytes: 14 << 30}}
	f := PlanFit(m, machine, nil, store.At(t.TempDir()))
	if f.Verdict != NoFit || f.Placement.Ctx != minCtx || !strings.Contains(f.Reason, "14.0 GiB is available") {
		t.Errorf("verdict %q: %s (context %d)", f.Verdict, f.Reason, f.Placement.Ctx)
	}
}

// Without a GPU a small model runs on the CPU with its draft and trainer;
// memory for the target alone leaves the draft out; a tight machine gets a
// shorter context.
func TestFitCPU(t *testing.T) {
	m := shapeModel(t, "tinyllama-1.1b.Q4_K_M.gguf", 2048, 22, 32, 4, 5632, 32000, 2048, q4km)
	st := store.At(t.TempDir())
	roomy := probe.Report{CPU: probe.CPU{Cores: 2}, Memory: probe.Memory{AvailableBytes: 24 << 30}}
	f := PlanFit(m, roomy, nil, st)
	if f.Verdict != FitsCPU || f.Placement.DraftDevice != "cpu" || f.Placement.TrainerDevice != "cpu" || f.Placement.Ctx != 2048 {
		t.Errorf("24 GiB: %q (%s) %+v", f.Verdict, f.Reason, f.Placement)
	}
	target := targetBudget(m, 2048, 2, 0).CPU()
	tight := probe.Report{CPU: probe.CPU{Cores: 2}, Memory: probe.Memory{AvailableBytes: target + 1<<20}}
	f = PlanFit(m, tight, nil, st)
	if f.Placement.DraftDevice != "none" || f.Placement.Ctx != 2048 || !strings.Contains(f.Reason, "no draft fits") {
		t.Errorf("room for the target alone: %q (%s) %+v", f.Verdict, f.Reason, f.Placement)
	}
	tighter := probe.Report{CPU: probe.CPU{Cores: 2}, Memory: probe.Memory{AvailableBytes: target - 1<<20}}
	if f := PlanFit(m, tighter, nil, st); f.Placement.Ctx != 1024 || f.Verdict == NoFit {
		t.Errorf("a little less: %q (%s) %+v", f.Verdict, f.Reason, f.Placement)
	}
}
