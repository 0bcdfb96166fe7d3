package dgf

import (
	"math/rand/v2"
	"slices"
	"testing"

	"dovetail/device"
	"dovetail/device/cuda/cudatest"
	"dovetail/dgf/dgftest"
	"dovetail/internal/golden"
)

// int8Agreement is how often a draft frozen for drafting (its large
// matrices in Q8_0, multiplied with 8-bit activations) proposes the same
// next token as its float32 weights do, position by position over a
// window: the int8 draft's rate.
func int8Agreement(t *testing.T, dev device.Device) float64 {
	t.Helper()
	c := freezeConfig
	ref := newDraft32(t, c, 9)
	float, err := ref.Clone(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer float.Free()
	int8, err := ref.Clone(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer int8.Free()
	if err := int8.FreezeForDrafting(); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(int8.Params, func(p *Param) bool { return p.Q != nil }) {
		t.Fatalf("%s: no matrix frozen into Q8_0", dev.Name())
	}
	const T = 48
	w := dgftest.RandWindow(rand.New(rand.NewPCG(9, 9)), T, c.Hidden, c.Vocab, 1)
	sf, sq := float.NewSequence(0), int8.NewSequence(0)
	defer sf.Free()
	defer sq.Free()
	same := 0
	for i := range T {
		lf, _, err := sf.Forward(w.Features[i:i+1], w.Tokens[i+1:i+2])
		if err != nil {
			t.Fatal(err)
		}
		top := golden.Argmax(lf)
		lq, _, err := sq.Forward(w.Features[i:i+1], w.Tokens[i+1:i+2])
		if err != nil {
			t.Fatal(err)
		}
		if golden.Argmax(lq) == top {
			same++
		}
	}
	return float64(same) / T
}

// The int8 draft proposes the float draft's token on most steps (the
// target verifies either: its output does not change). Broken 8-bit
// products would agree on about 1 step in the vocabulary's 40.
func TestInt8DraftAgreesWithFloat(t *testing.T) {
	// The host keeps matrices of up to H² values as float32: the larger
	// ones go to Q8_0, as they do on a GPU.
	host := device.NewHostWith(device.HostConfig{Threads: 2, Float32Upto: freezeConfig.Hidden * freezeConfig.Hidden})
	rate := int8Agreement(t, host)
	t.Logf("host: the int8 draft's top token is the float draft's on %.0f%% of steps", 100*rate)
	if rate < 0.75 {
		t.Errorf("host: the int8 draft agrees with the float draft on %.0f%% of steps", 100*rate)
	}
}

func TestCUDAInt8DraftAgreesWithFloat(t *testing.T) {
	dev := cudatest.Device(t)
	rate := int8Agreement(t, dev)
	t.Logf("%s: the int8 draft's top token is the float draft's on %.0f%% of steps", dev.Name(), 100*rate)
	if rate < 0.75 {
		t.Errorf("%s: the int8 draft agrees with the float draft on %.0f%% of steps", dev.Name(), 100*rate)
	}
}
