package runner

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"dovetail/cpu"
	"dovetail/engine"
	"dovetail/gpu"
	"dovetail/internal/golden"
)

// onHost sends offloaded layers to the host device's layer path: a GPU's
// part of the target, tested without one.
func onHost(o *Options) {
	o.layerDevice = func() (gpu.Device, error) { return gpu.NewHost(1), nil }
}

// With its last 1, L/2 or L layers on the host device's layer path, the
// target decodes greedily what it decodes on the CPU alone — but where
// the CPU's two best tokens are nearly tied, which the devices' roundings
// may order either way (as llama.cpp's CPU and GPU do) — and the same
// with each drafter, token for token (tree verification and compaction on
// both sides); the budget counts the layers on their device.
func TestOffloadSpeculative(t *testing.T) {
	for _, name := range []string{"", "stories260K-f32.gguf"} {
		m := open(t, name)
		o := options(t)
		o.Draft, o.Plan, o.GPULayers = "none", false, 0
		cpuOut, _ := greedy(t, start(t, m, o), "Lily and Tom", 40)
		drafts := []string{"none", "ngram", "auto"}
		if name != "" {
			drafts = []string{"none", "ngram", "model:" + golden.ModelPath("stories260K-Q4_0-mixed.gguf"), "dgf:" + zeroDraft(t, m)}
		}
		L := m.Config().Layers
		for _, k := range slices.Compact([]int{1, L / 2, L}) {
			var plain []int // the split's, without drafting
			for _, d := range drafts {
				kind, _, _ := strings.Cut(d, ":")
				t.Run(fmt.Sprintf("%s/k=%d/%s", m.Name, k, kind), func(t *testing.T) {
					o := options(t)
					o.Draft, o.Plan, o.GPULayers, o.Greedy, o.Tree = d, false, k, true, engine.LaptopTree
					o.Adapt.Mode = engine.AdaptOff
					onHost(&o)
					r := start(t, m, o)
					if r.off == nil || r.off.layers.From != L-k {
						t.Fatalf("%d layers asked for, placed %+v", k, r.off)
					}
					if b, dev := partBytes(r.Budget(), "target layers"); b == 0 || !strings.HasPrefix(dev, "host") {
						t.Errorf("budget: target layers %d bytes on %q", b, dev)
					}
					out, st := greedy(t, r, "Lily and Tom", 40)
					if plain == nil {
						plain = out
						sameButNearTies(t, m, "Lily and Tom", out, cpuOut)
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

// --gpu-layers without a GPU says so in one line and runs every layer on
// the CPU; auto says nothing; 0 asks for nothing.
func TestOffloadWithoutGPU(t *testing.T) {
	if d, err := gpu.NewCUDA(0); err == nil {
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
		o.Draft, o.GPULayers, o.Device = "none", c.layers, c.device
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
