package runner

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"dovetail/device"
	"dovetail/engine"
	"dovetail/engine/adapt"
)

// failingGPU is the host device posing as a GPU whose next product fails
// once fail is set: a card that runs out of memory in the middle of a run.
type failingGPU struct {
	device.Device
	fail *atomic.Bool
}

func (d *failingGPU) Name() string { return "failing GPU" }
func (d *failingGPU) MatMulFrozen(out, x device.Buffer, w device.Matrix, n int) {
	if d.fail.CompareAndSwap(true, false) {
		panic(&device.Error{Err: errors.New("out of memory")})
	}
	d.Device.MatMulFrozen(out, x, w, n)
}

// A GPU that fails mid-run: the target's layers there go to half as many
// with a warning, and the generation runs again on them (it had given out
// no token) with the output of the target alone; one that fails after
// tokens were given out returns its error, and the next runs on fewer
// layers. Nothing panics.
func TestGPUFailsMidRun(t *testing.T) {
	m := open(t, "")
	L := m.Config().Layers
	var fail atomic.Bool
	o := options(t)
	o.Draft, o.Adapt.Mode = DraftChoice{Kind: DraftNone}, adapt.Off
	o.layerDevice = func() (device.Device, error) { return &failingGPU{Device: device.NewHost(1), fail: &fail}, nil }
	// What the target gives with half its layers on that device, which
	// does not fail: the split's rounding, not the CPU's alone.
	o.GPULayers = L / 2
	want, _ := greedy(t, start(t, m, o), "Once upon a time", 16)
	o.GPULayers = L
	var notes []string
	o.Notify = func(n Notice) {
		if n.Warning {
			notes = append(notes, n.Text)
		}
	}
	r := start(t, m, o)
	if r.off == nil || r.off.layers.From != 0 {
		t.Fatalf("placed %+v, want all %d layers on the failing GPU", r.off, L)
	}
	fail.Store(true)
	got, _ := greedy(t, r, "Once upon a time", 16)
	if !slices.Equal(got, want) {
		t.Errorf("after the GPU failed: %v, want %v", got, want)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "failing GPU failed with") || !strings.Contains(notes[0], "trying") {
		t.Errorf("said %q", notes)
	}
	if r.off == nil || L-r.off.layers.From != L/2 {
		t.Errorf("after the failure %+v, want %d layers on the GPU", r.off, L/2)
	}
	if n, _ := partBytes(r.Budget(), "target layers"); n == 0 {
		t.Error("the budget counts no layers on the GPU")
	}

	// A failure after the first token: the error, then fewer layers (none
	// where there was one).
	o.GPULayers = max(0, L/4)
	if L/4 == 0 {
		o.layerDevice = nil
		o.Device.Kind = DeviceCPU
	}
	want, _ = greedy(t, start(t, m, o), "Once upon a time", 16)
	m2 := r.Model()
	req := engine.Request{Prompt: m2.Tok.Encode("Once upon a time", true, false), MaxTokens: 16, Stop: m2.Tok.IsEOG}
	_, err := r.Slot(0).Generate(context.Background(), req, func(int) error { fail.Store(true); return nil })
	var de *device.Error
	if !errors.As(err, &de) {
		t.Errorf("a failure after a token: %v", err)
	}
	got, _ = greedy(t, r, "Once upon a time", 16)
	if !slices.Equal(got, want) {
		t.Errorf("after the second failure: %v, want %v", got, want)
	}
	if placed := func() int {
		if r.off == nil {
			return 0
		}
		return L - r.off.layers.From
	}(); placed != L/4 {
		t.Errorf("after the second failure %d layers on the GPU, want %d", placed, L/4)
	}
}
