package runner

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"dovetail/app/runner/probe"
	"dovetail/app/runner/store"
	"dovetail/cpu"
	"dovetail/device"
	"dovetail/device/cuda"
	"dovetail/device/cuda/cudatest"
	"dovetail/engine/adapt"
	"dovetail/engine/tree"
	"dovetail/internal/golden"
	"dovetail/offload"
	"dovetail/quant"
)

// onHost sends offloaded layers to the host device's layer path: a GPU's
// part of the target, tested without one.
func onHost(o *Options) {
	o.layerDevice = func() (device.Device, error) { return device.NewHost(1), nil }
}

// layerPlaces are where a test's offloaded layers go: the host device's
// layer path, and the GPU that --gpu-layers opens on a user's machine
// (where this machine has no NVIDIA GPU, the CUDA emulator).
func layerPlaces(t *testing.T) map[string]func(*Options) {
	places := map[string]func(*Options){"host": onHost}
	if cudatest.Driver(t) {
		places["cuda"] = func(o *Options) { o.Device = DeviceChoice{} }
	}
	return places
}

// With its last 1, L/2 or L layers on the host device's layer path (and
// on the GPU, where there is one), the target decodes greedily what it decodes on the CPU alone — but where
// the CPU's two best tokens are nearly tied, which the devices' roundings
// may order either way (as llama.cpp's CPU and GPU do) — and the same
// with each drafter, token for token (tree verification and compaction on
// both sides); the budget counts the layers on their device.
func TestOffloadSpeculative(t *testing.T) {
	for _, c := range []struct{ name, prompt string }{
		{"", "Lily and Tom"}, {"", "Once upon a time"}, {"stories260K-f32.gguf", "Lily and Tom"},
	} {
		name, prompt := c.name, c.prompt
		m := open(t, name)
		o := options(t)
		o.Draft, o.Plan, o.GPULayers = DraftChoice{Kind: DraftNone}, false, 0
		cpuOut, _ := greedy(t, start(t, m, o), prompt, 40)
		drafts := []string{"none", "ngram", "auto"}
		if name != "" {
			drafts = []string{"none", "ngram", "model:" + golden.ModelPath("stories260K-Q4_0-mixed.gguf"), "dgf:" + zeroDraft(t, m)}
		}
		L := m.Config().Layers
		for place, to := range layerPlaces(t) {
			for _, k := range slices.Compact([]int{1, L / 2, L}) {
				var plain []int // the split's, without drafting
				for _, d := range drafts {
					kind, _, _ := strings.Cut(d, ":")
					t.Run(fmt.Sprintf("%s/%s/%s/k=%d/%s", place, m.Name, prompt, k, kind), func(t *testing.T) {
						o := options(t)
						o.Draft, o.Plan, o.GPULayers, o.Greedy, o.Tree = mustDraft(t, d), false, k, true, tree.Laptop
						o.Adapt.Mode = adapt.Off
						to(&o)
						r := start(t, m, o)
						if r.off == nil || r.off.layers.From != L-k {
							t.Fatalf("%d layers asked for, placed %+v", k, r.off)
						}
						if b, dev := partBytes(r.Budget(), "target layers"); b == 0 || dev == "" || dev == "cpu" || (place == "host") != strings.HasPrefix(dev, "host") {
							t.Errorf("budget: target layers %d bytes on %q", b, dev)
						}
						out, st := greedy(t, r, prompt, 40)
						if plain == nil {
							plain = out
							sameButNearTies(t, m, prompt, out, cpuOut)
						}
						if !slices.Equal(out, plain) {
							t.Errorf("drafting with %s: %v\nwithout:  %v", d, out, plain)
						}
						if (d == "none") != (st.Rounds == 0) {
							t.Errorf("%d speculative rounds", st.Rounds)
						}
					})
				}
			}
		}
	}
}

// --gpu-layers without a GPU says so in one line and runs every layer on
// the CPU; auto says nothing; 0 asks for nothing.
func TestOffloadWithoutGPU(t *testing.T) {
	if d, err := cuda.Open(0); err == nil {
		d.Close()
		t.Skip("this machine has a GPU")
	}
	m := open(t, "")
	for _, c := range []struct {
		layers int
		device string
		want   string
	}{
		{4, "auto", "--gpu-layers 4: no NVIDIA GPU here: every layer runs on the CPU"},
		{4, "cpu", "--gpu-layers 4: --device cpu keeps every layer on the CPU"},
		{GPULayersAuto, "auto", ""},
		{0, "auto", ""},
	} {
		o := options(t)
		o.Draft, o.GPULayers, o.Device = DraftChoice{Kind: DraftNone}, c.layers, mustDevice(t, c.device)
		var notes []string
		o.Notify = func(n Notice) { notes = append(notes, n.Text) }
		r := start(t, m, o)
		var said []string
		for _, n := range notes {
			if strings.Contains(n, "gpu-layers") {
				said = append(said, n)
			}
		}
		if r.off != nil || (c.want == "" && len(said) > 0) || (c.want != "" && !slices.Equal(said, []string{c.want})) {
			t.Errorf("--gpu-layers %d --device %s: offload %v, notices %q", c.layers, c.device, r.off, said)
		}
		if out, _ := greedy(t, r, "Once", 8); len(out) == 0 {
			t.Error("nothing generated")
		}
	}
}

// sameButNearTies checks that greedy outputs got and want of prompt agree
// up to where they part, and that they part where want's two best tokens
// were within 0.15 (the golden tests' near tie).
func sameButNearTies(t *testing.T, m *Model, prompt string, got, want []int) {
	t.Helper()
	i := 0
	for i < min(len(got), len(want)) && got[i] == want[i] {
		i++
	}
	if i == len(got) && i == len(want) {
		return
	}
	pool := cpu.NewPool(1)
	defer pool.Close()
	tg := cpu.NewTarget(m.Llama, pool, 0)
	logits, err := tg.Forward(append(m.Tok.Encode(prompt, true, false), want[:i]...))
	if err != nil {
		t.Fatal(err)
	}
	top := slices.Clone(logits)
	slices.Sort(top)
	if gap := top[len(top)-1] - top[len(top)-2]; i >= min(len(got), len(want)) || gap >= 0.15 {
		t.Errorf("the split parts from the CPU at token %d, where the CPU's two best are %.3g apart:\nsplit %v\nCPU   %v", i, gap, got, want)
	} else {
		t.Logf("the split parts from the CPU at token %d, a near tie (%.3g)", i, gap)
	}
}

// The arithmetic of --gpu-layers auto for Llama-2-7B (Q4_0 and Q4_K_M) on
// a 6 GB and an 8 GB card, 30 GiB of RAM: after the draft's share of the
// card and the reserve, the LM head and each sequence's scratch first,
// then whole layers, each with its weights as the CUDA device holds them
// (the file's blocks) and its keys and values in halves at the context.
// The LM head is the draft's copy, which the layers share on its card.
func TestOffloadAuto7B(t *testing.T) {
	const H, F, V, ctx = 4096, 11008, 32000, 4096
	kv := uint64(2 * 2 * ctx * H) // halves on a GPU
	// A pass of 64 rows: 9 rows of H (the keys and values before the
	// cache takes them among them: 32 KV heads, so H), 3 of F, the
	// logits, the attention's weights.
	scratch := uint64(4 * (64*(9*H+3*F+V) + 64*32*ctx))
	for _, c := range []struct {
		file                string
		types               map[string]quant.Type
		layerFile, headFile uint64
	}{
		{"llama-2-7b.Q4_0.gguf", map[string]quant.Type{"weight": quant.Q4_0}, (4*H*H + 3*F*H) / 32 * 18, V * H / 32 * 18},
		// Q4_K (144 bytes a 256) but V and down in Q6_K (210), the head Q6_K.
		{"llama-2-7b.Q4_K_M.gguf", q4km, (3*H*H+2*F*H)/256*144 + (H*H+F*H)/256*210, V * H / 256 * 210},
	} {
		m := shapeModel(t, c.file, H, 32, 32, 32, F, V, ctx, c.types)
		perLayer := c.layerFile + 2*4*H + kv
		fixed := c.headFile + 4*H + scratch
		if one, _ := offload.Measure(m.Llama, 31, ctx, 1, true); one != fixed+perLayer {
			t.Fatalf("%s: one layer with the head takes %d bytes, by hand %d", c.file, one, fixed+perLayer)
		}
		for _, card := range []struct {
			name string
			free uint64
		}{{"RTX 2060 (6 GB)", 5632 << 20}, {"RTX 2080 SUPER (8 GB)", 7680 << 20}} {
			machine := probe.Report{CPU: probe.CPU{Cores: 8, Threads: 16}, Memory: probe.Memory{TotalBytes: 32e9, AvailableBytes: 30 << 30},
				GPUs: []probe.GPU{{Name: card.name, VRAMTotalBytes: card.free + 512<<20, VRAMFreeBytes: card.free}}}
			f := PlanFit(m, machine, nil, store.At(t.TempDir()))
			placed := f.Budget.GPU()
			layers, _ := partBytes(f.Budget, "target layers")
			avail := card.free - (placed - layers) - gpuReserve
			shared := fixed
			if f.Placement.DraftDevice == card.name {
				shared -= c.headFile
			}
			want := 0
			if avail > shared {
				want = min(32, int((avail-shared)/perLayer))
			}
			if f.Placement.GPULayers != want || (want > 0 && layers != shared+uint64(want)*perLayer) {
				t.Errorf("%s on %s: %d layers (%d bytes) placed, by hand %d of %d bytes free beside the draft's %d",
					c.file, card.name, f.Placement.GPULayers, layers, want, avail, placed-layers)
			}
			t.Logf("%s on %s: %d layers beside the draft (%s on the card): %s", c.file, card.name, f.Placement.GPULayers,
				HumanBytes(placed-layers), f.Reason)
		}
	}
}

// Under auto, a target whose layers are under gpuMinLayerBytes stays on
// the CPU, which decodes it faster, and nothing is said; setup says why;
// a number given still places them (TestOffloadSpeculative). A 7B
// model's layers are far over it.
func TestOffloadAutoSmallLayers(t *testing.T) {
	m := open(t, "")
	if b := layerBytes(m.Llama); b == 0 || b >= gpuMinLayerBytes {
		t.Fatalf("the embedded model's layers: %d bytes each", b)
	}
	o := options(t)
	o.Draft = DraftChoice{Kind: DraftNone}
	var notes []string
	o.Notify = func(n Notice) { notes = append(notes, n.Text) }
	onHost(&o)
	if r := start(t, m, o); r.off != nil || len(notes) != 0 {
		t.Errorf("auto placed %+v, said %q", r.off, notes)
	}
	machine := probe.Report{CPU: probe.CPU{Cores: 8, Threads: 16}, Memory: probe.Memory{TotalBytes: 32e9, AvailableBytes: 30 << 30},
		GPUs: []probe.GPU{{Name: "RTX 2060", VRAMTotalBytes: 6 << 30, VRAMFreeBytes: 5632 << 20}}}
	f := PlanFit(m, machine, nil, store.At(t.TempDir()))
	if f.Placement.GPULayers != 0 || !strings.Contains(f.Reason, "the target on the CPU (its layers") {
		t.Errorf("setup: %d layers on the GPU: %s", f.Placement.GPULayers, f.Reason)
	}
	const H, F = 4096, 11008
	big := shapeModel(t, "llama-2-7b.Q4_0.gguf", H, 32, 32, 32, F, 32000, 4096, map[string]quant.Type{"weight": quant.Q4_0})
	if b := layerBytes(big.Llama); b != (4*H*H+3*F*H)/32*18 {
		t.Errorf("a 7B Q4_0 layer: %d bytes, by hand %d", b, (4*H*H+3*F*H)/32*18)
	}
}
