package runner

import (
	"fmt"
	"strings"
	"testing"

	"dovetail/device"
	"dovetail/engine/adapt"
	"dovetail/internal/plural"
	"dovetail/models"
	"dovetail/offload"
)

// tightGPU is the host device with a GPU's memory of limit bytes, counted
// as a GPU holds them (device.Counter's way), that says it has far more
// free: a card whose memory another process took after the runner
// measured it. Each open starts empty, as a GPU's context does.
type tightGPU struct {
	device.Device
	limit, used uint64
}

func (d *tightGPU) take(n uint64) {
	if d.used+n > d.limit {
		panic(&device.Error{Err: fmt.Errorf("out of memory: %d bytes of %d used, %d more asked", d.used, d.limit, n)})
	}
	d.used += n
}

func (d *tightGPU) Name() string                  { return "tight GPU" }
func (d *tightGPU) MemInfo() (free, total uint64) { return 1 << 40, 1 << 40 }
func (d *tightGPU) Alloc(n int) device.Buffer {
	d.take(4 * uint64(n))
	return d.Device.Alloc(n)
}
func (d *tightGPU) AllocKV(n int) device.Buffer { // halves on a GPU
	d.take(2 * uint64(n))
	return d.Device.Alloc(n)
}
func (d *tightGPU) UploadMatrix(t *models.Tensor) (device.Matrix, error) {
	n := 4 * uint64(t.Rows) * uint64(t.Cols)
	if device.GPUKeepsBlocks(t.Type) {
		n = uint64(t.Rows) * uint64(t.RowBytes)
	}
	d.take(n)
	return d.Device.UploadMatrix(t)
}

// A GPU that has less memory than it said at the start: where the
// layers' weights do not fit, and where their weights fit but the
// sequences' caches do not, the runner says so in a warning, tries half
// the layers, and so on until they fit (none at worst), and the target
// decodes; the budget counts the layers it kept, once.
func TestOffloadOutOfMemory(t *testing.T) {
	m := open(t, "")
	L, ctx := m.Config().Layers, 512
	weights := func(k int) uint64 { n, _ := offload.Measure(m.Llama, L-k, ctx, 0, true); return n }
	all := func(k int) uint64 { n, _ := offload.Measure(m.Llama, L-k, ctx, 1, true); return n }
	for _, limit := range []uint64{weights(L) - 1, all(L) - 1, all(L / 2), all(1) - 1} {
		// By hand: halve until the weights and caches fit, each step said.
		var want []string
		k := L
		for ; k > 0 && all(k) > limit; k /= 2 {
			what := plural.Of(k, "target layer") + " did not fit on tight GPU"
			if weights(k) <= limit {
				what = "the caches of " + plural.Of(k, "target layer") + " did not fit on tight GPU"
			}
			want = append(want, what+fmt.Sprintf(" (gpu: out of memory: %%s): trying %d", k/2))
		}
		o := options(t)
		o.Draft, o.GPULayers, o.Ctx, o.Adapt.Mode = DraftChoice{Kind: DraftNone}, L, ctx, adapt.Off
		o.layerDevice = func() (device.Device, error) { return &tightGPU{Device: device.NewHost(1), limit: limit}, nil }
		var notes []string
		o.Notify = func(n Notice) {
			if n.Warning {
				notes = append(notes, n.Text)
			}
		}
		r := start(t, m, o)
		if (k == 0) != (r.off == nil) || (r.off != nil && r.off.layers.From != L-k) {
			t.Fatalf("limit %d: placed %+v, by hand %d layers; said %q", limit, r.off, k, notes)
		}
		if len(want) == 0 || len(notes) != len(want) {
			t.Errorf("limit %d: said %q, by hand %d steps", limit, notes, len(want))
		}
		for i := range min(len(notes), len(want)) {
			head, tail, _ := strings.Cut(want[i], "%s")
			if !strings.HasPrefix(notes[i], head) || !strings.HasSuffix(notes[i], tail) {
				t.Errorf("limit %d: said %q, want %q", limit, notes[i], want[i])
			}
		}
		var parts []uint64
		for _, p := range r.Budget().Parts {
			if p.Name == "target layers" {
				parts = append(parts, p.Bytes)
			}
		}
		if (k > 0 && (len(parts) != 1 || parts[0] != all(k))) || (k == 0 && len(parts) != 0) {
			t.Errorf("limit %d: budget's target layers %v, want %d layers' %d", limit, parts, k, all(k))
		}
		if out, _ := greedy(t, r, "Once", 8); len(out) == 0 {
			t.Errorf("limit %d: nothing generated", limit)
		}
		t.Logf("limit %d: %d of %d layers; %q", limit, k, L, notes)
	}
}
