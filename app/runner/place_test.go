package runner

import (
	"fmt"
	"strings"
	"testing"

	"dovetail/app/runner/probe"
	"dovetail/app/runner/store"
	"dovetail/device"
	"dovetail/models/draft"
	"dovetail/offload"
	"dovetail/train"
)

// placeShape is a model shape of the placement table, at Q4_K_M's mix.
type placeShape struct {
	name                           string
	hidden, layers, heads, kv, ffn int
	vocab, ctx                     int
}

// placeShapes are TinyLlama-1.1B, Llama-2-7B and Llama-3-8B.
var placeShapes = []placeShape{
	{"tinyllama-1.1b.Q4_K_M.gguf", 2048, 22, 32, 4, 5632, 32000, 2048},
	{"llama-2-7b.Q4_K_M.gguf", 4096, 32, 32, 32, 11008, 32000, 4096},
	{"llama-3-8b.Q4_K_M.gguf", 4096, 32, 32, 8, 14336, 128256, 8192},
}

// placeCards are the cards of the table, GiB free.
var placeCards = []uint64{4, 6, 8, 12, 24}

// planCard plans s on a card with gib GiB free and a host roomy enough
// that only the card decides.
func planCard(t *testing.T, s placeShape, gib uint64) (*Model, Fit) {
	t.Helper()
	m := shapeModel(t, s.name, s.hidden, s.layers, s.heads, s.kv, s.ffn, s.vocab, s.ctx, q4km)
	card := fmt.Sprintf("%d GiB card", gib)
	machine := probe.Report{CPU: probe.CPU{Cores: 8, Threads: 16}, Memory: probe.Memory{TotalBytes: 128 << 30, AvailableBytes: 100 << 30},
		GPUs: []probe.GPU{{Name: card, VRAMTotalBytes: gib << 30, VRAMFreeBytes: gib << 30}}}
	return m, PlanFit(m, machine, nil, store.At(t.TempDir()))
}

// The placement table: for each shape and card, the draft goes on the
// card first whenever it fits there with the reserve; then as many of the
// target's last layers as fit beside it, counted as the device holds
// them (k fit, k+1 do not, all of them where they fit), never fewer for
// the trainer, which goes on the card only in the room the layers leave;
// and more VRAM never places fewer layers. setup --json says the same
// arithmetic.
func TestPlacementTable(t *testing.T) {
	for _, s := range placeShapes {
		prev := 0
		for _, gib := range placeCards {
			m, f := planCard(t, s, gib)
			p, free, L := f.Placement, gib<<30, s.layers
			card := fmt.Sprintf("%d GiB card", gib)
			draftBytes, draftOn := partBytes(f.Budget, "draft")
			trainerBytes, trainerOn := partBytes(f.Budget, "trainer")
			onCard := draftBytes*b2u(draftOn == card) + trainerBytes*b2u(trainerOn == card)
			// What the draft alone takes on a GPU, as placeDraft counts it.
			fp, err := train.MeasureEmbedding(draft.ForTarget(m.Config(), 1, 0), m.Llama, nil, p.Ctx, 1, nil, device.NewCounter(true), device.NewCounter(true))
			if err != nil {
				t.Fatal(err)
			}
			if fp.Draft+gpuReserve <= free && p.DraftDevice != card {
				t.Errorf("%s on %s: the draft (%s) is on %q", s.name, card, HumanBytes(fp.Draft), p.DraftDevice)
			}
			if p.GPULayers > 0 && p.DraftDevice != card {
				t.Errorf("%s on %s: %d layers before the draft (on %q)", s.name, card, p.GPULayers, p.DraftDevice)
			}
			// The layers fit beside the draft alone: the trainer took none
			// of their room.
			draftOnly := draftBytes * b2u(draftOn == card)
			avail := free - min(free, draftOnly+gpuReserve)
			k := p.GPULayers
			// Beside the draft, the layers use its copy of the LM head.
			lent := headBytes(m.Llama) * b2u(draftOn == card)
			got, _ := offload.Measure(m.Llama, L-k, p.Ctx, 1, true)
			got -= lent
			if k > 0 && got > avail {
				t.Errorf("%s on %s: %d layers take %d bytes of %d", s.name, card, k, got, avail)
			}
			if k < L {
				if next, _ := offload.Measure(m.Llama, L-k-1, p.Ctx, 1, true); next-lent <= avail {
					t.Errorf("%s on %s: %d layers placed, %d fit in %d bytes", s.name, card, k, k+1, avail)
				}
			}
			if trainerOn == card && satAdd(onCard, got)+gpuReserve > free {
				t.Errorf("%s on %s: the trainer (%s) on the card beside %d layers of %s", s.name, card, HumanBytes(trainerBytes), k, HumanBytes(got))
			}
			if k < prev {
				t.Errorf("%s: %d layers on %s, %d on a smaller card", s.name, k, card, prev)
			}
			prev = k
			checkArithmetic(t, s, card, f)
			var kv uint64
			if len(f.GPUs) == 1 {
				kv = uint64(k) * f.GPUs[0].Layers[0].KVBytes
			}
			t.Logf("| %s | %d GiB | %d of %d | %s | %s | %s | %s on %s |", s.name, gib, k, L, HumanBytes(draftBytes), HumanBytes(kv),
				HumanBytes(got), HumanBytes(trainerBytes), strings.TrimSuffix(trainerOn, " card"))
		}
	}
}

// checkArithmetic checks setup's GPU arithmetic against the fit and the
// shape by hand: each layer's weights at the file's bytes (Q4_K, with V
// and down in Q6_K) and two float32 norms, its keys and values in halves
// at the context; the LM head the draft's where the draft is on the card.
func checkArithmetic(t *testing.T, s placeShape, card string, f Fit) {
	t.Helper()
	if len(f.GPUs) != 1 {
		t.Fatalf("%s on %s: %d GPU plans", s.name, card, len(f.GPUs))
	}
	g, H, KV, F := f.GPUs[0], s.hidden, s.kv*s.hidden/s.heads, s.ffn
	weights := uint64((2*H*H+KV*H+2*F*H)/256*144+(KV*H+F*H)/256*210) + 2*4*uint64(H)
	kv := uint64(2 * 2 * f.Placement.Ctx * KV) // halves on a GPU
	layers, _ := partBytes(f.Budget, "target layers")
	draftBytes, _ := partBytes(f.Budget, "draft")
	switch {
	case g.Device != card || g.GPULayers != f.Placement.GPULayers || g.LayersBytes != layers || g.ReserveBytes != gpuReserve:
		t.Errorf("%s on %s: plan %+v, placement %+v", s.name, card, g, f.Placement)
	case f.Placement.DraftDevice == card && g.DraftBytes != draftBytes:
		t.Errorf("%s on %s: the plan's draft %d, the budget's %d", s.name, card, g.DraftBytes, draftBytes)
	case g.HeadLent != (f.Placement.DraftDevice == card):
		t.Errorf("%s on %s: head lent %v with the draft on %q", s.name, card, g.HeadLent, f.Placement.DraftDevice)
	case f.Placement.DraftDevice == card && g.HeadBytes != uint64(4*H):
		// The draft's copy of the LM head (Q6_K) serves the layers: only
		// the final norm is theirs.
		t.Errorf("%s on %s: head %d beside the draft's, by hand %d", s.name, card, g.HeadBytes, 4*H)
	case f.Placement.DraftDevice != card && g.HeadBytes != uint64(s.vocab*H/256*210+4*H):
		t.Errorf("%s on %s: head %d, by hand %d", s.name, card, g.HeadBytes, s.vocab*H/256*210+4*H)
	case g.FreeBytes != g.ReserveBytes+g.DraftBytes+g.TrainerBytes+g.LayersBytes+g.LeftBytes:
		t.Errorf("%s on %s: %d free is not %+v", s.name, card, g.FreeBytes, g)
	}
	for _, l := range g.Layers {
		if l.WeightsBytes != weights || l.KVBytes != kv {
			t.Errorf("%s layer %d: %d + %d bytes, by hand %d + %d", s.name, l.Layer, l.WeightsBytes, l.KVBytes, weights, kv)
		}
	}
	wantListed := min(g.GPULayers+1, s.layers)
	if len(g.Layers) != wantListed || (len(g.Layers) > 0 && g.Layers[0].Layer != s.layers-1) {
		t.Errorf("%s on %s: %d layers listed (%+v), want %d from the last", s.name, card, len(g.Layers), g.Layers, wantListed)
	}
	if g.GPULayers < s.layers && !strings.Contains(g.Stop, fmt.Sprintf("layer %d (", s.layers-1-g.GPULayers)) {
		t.Errorf("%s on %s: stop %q", s.name, card, g.Stop)
	}
	if g.GPULayers == s.layers && (g.Stop != fmt.Sprintf("all %d layers fit", s.layers) || !strings.HasPrefix(f.Reason, fmt.Sprintf("all %d of the target's layers on %s;", s.layers, card))) {
		t.Errorf("%s on %s: stop %q, reason %q", s.name, card, g.Stop, f.Reason)
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// The trainer goes on the GPU only in the room the target's layers leave:
// a 7B's new draft on a 12 GiB card trains there beside 10 layers
// (--gpu-layers 10) or none (--gpu-layers 0), on the CPU under auto,
// whose 32 layers leave too little; on the CPU too where the reserve
// alone would not be left beside the draft and its trainer; the draft
// itself goes on the card only with the reserve beside it.
func TestPlaceDraftTrainerAfterLayers(t *testing.T) {
	s := placeShapes[1]
	m := shapeModel(t, s.name, s.hidden, s.layers, s.heads, s.kv, s.ffn, s.vocab, s.ctx, q4km)
	a := DefaultAdapt()
	base := targetBudget(m, s.ctx, 8, 100<<30)
	q := draftRequest{base: base, cfg: draft.ForTarget(m.Config(), 1, 0), m: m.Llama, ctx: s.ctx, seqs: 1, needLearn: true,
		hostBytes: a.Engine.HostBytes(), room: &gpuRoom{name: "card", free: 12 << 30},
		learn: &train.Learn{Config: trainConfig(a, true), MaxRows: learnRows(a.Engine), MaxLen: learnLen(a.Engine), EvalDepth: learnDepth}}
	fp, err := train.MeasureEmbedding(q.cfg, m.Llama, nil, s.ctx, 1, q.learn, device.NewCounter(true), device.NewCounter(true))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		layers             int // --gpu-layers (GPULayersAuto: auto)
		free               uint64
		draftGPU, trainGPU bool
	}{
		{0, 12 << 30, true, true},
		{10, 12 << 30, true, true},
		{GPULayersAuto, 12 << 30, true, false},
		{0, fp.Draft + fp.Trainer + gpuReserve, true, true},
		{0, fp.Draft + fp.Trainer + gpuReserve - 1, true, false},
		{0, fp.Draft + gpuReserve, true, false},
		{0, fp.Draft + gpuReserve - 1, false, false},
	} {
		q.room.free = c.free
		q.layers = askLayers(m.Llama, s.ctx, 1, layersAsked(m.Llama, c.layers))
		p, ok, err := placeDraft(q)
		if err != nil || !ok || p.draftGPU != c.draftGPU || p.trainGPU != c.trainGPU || !p.learn {
			t.Errorf("--gpu-layers %d, %d bytes free: %+v, %v, %v", c.layers, c.free, p, ok, err)
		}
		if used := p.budget.GPU(); used+q.layers.bytes(gpuAvail(c.free, p.budget))+gpuReserve > c.free && p.draftGPU {
			t.Errorf("--gpu-layers %d: %d bytes on a card of %d", c.layers, used, c.free)
		}
	}
}
