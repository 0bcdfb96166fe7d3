package dgf

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"dovetail/device"
	"dovetail/dgf/dgftest"
	"dovetail/models/draft"
)

// initConfig has matrices of more than initChunk values (ffn_gate: 256 ×
// 384), which Init draws in two chunks.
var initConfig = draft.Config{Hidden: 256, Blocks: 1, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 384, Vocab: 16,
	Context: 64, RopeTheta: 10000, RMSEps: 1e-5}

func newInitDraft(t *testing.T) *Draft { return newInitDraftOn(t, device.NewHost(1)) }

// newInitDraftOn is a draft of initConfig on dev with zero weights.
func newInitDraftOn(t *testing.T, dev device.Device) *Draft {
	t.Helper()
	d, err := NewDraft(dev, initConfig, dgftest.Target(3, initConfig))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func paramValues(d *Draft, p *Param) []float32 {
	v := make([]float32, p.Size())
	d.Dev.Download(v, p.W)
	return v
}

// Init's matrices are uniform in ±sqrt(6/(rows+cols)), every chunk drawn
// anew, the same for the same seed; its norm weights are 1.
func TestInitUniform(t *testing.T) {
	d, again, other := newInitDraft(t), newInitDraft(t), newInitDraft(t)
	d.Init(7)
	again.Init(7)
	other.Init(8)
	chunked := 0
	for i, p := range d.Params {
		v := paramValues(d, p)
		if !slices.Equal(v, paramValues(again, again.Params[i])) {
			t.Errorf("%s: two draws of seed 7 differ", p.Name)
		}
		if p.Rows == 1 {
			if slices.ContainsFunc(v, func(x float32) bool { return x != 1 }) {
				t.Errorf("%s: a norm weight is not 1", p.Name)
			}
			continue
		}
		if slices.Equal(v, paramValues(other, other.Params[i])) {
			t.Errorf("%s: seeds 7 and 8 drew the same values", p.Name)
		}
		a := math.Sqrt(6 / float64(p.Rows+p.Cols))
		var sumAbs float64
		for _, x := range v {
			if float64(x) < -a || float64(x) >= a {
				t.Fatalf("%s: %g outside [-%g, %g)", p.Name, x, a, a)
			}
			sumAbs += math.Abs(float64(x))
		}
		if mean := sumAbs / float64(len(v)); math.Abs(mean-a/2) > 0.03*a {
			t.Errorf("%s: mean |x| %g, want about %g", p.Name, mean, a/2)
		}
		if len(v) > initChunk {
			chunked++
			m := min(initChunk, len(v)-initChunk)
			if slices.Equal(v[initChunk:initChunk+m], v[:m]) {
				t.Errorf("%s: its second chunk repeats the first", p.Name)
			}
		}
	}
	if chunked == 0 {
		t.Fatal("no matrix spans two chunks: the test shape is too small")
	}
}

// A set-up told to stop gives up at the next chunk or matrix.
func TestInitDayZeroStops(t *testing.T) {
	d := newInitDraft(t)
	calls := 0
	stopAfter := func(n int) func() bool {
		calls = 0
		return func() bool { calls++; return calls > n }
	}
	if err := d.initUnless(1, true, stopAfter(1<<30)); err != nil {
		t.Fatalf("never stopped: %v", err)
	}
	if calls <= len(d.Params) {
		t.Errorf("%d looks at stop for %d parameters, want one a chunk too", calls, len(d.Params))
	}
	for _, n := range []int{0, 3, calls - 1} {
		if err := d.initUnless(1, true, stopAfter(n)); !errors.Is(err, ErrStopped) {
			t.Errorf("told to stop after %d looks: %v, want ErrStopped", n, err)
		}
		if calls != n+1 {
			t.Errorf("told to stop after %d looks, went on to %d", n, calls)
		}
	}
	if err := d.FreezeForDraftingUnless(stopAfter(0)); !errors.Is(err, ErrStopped) {
		t.Errorf("freeze told to stop: %v, want ErrStopped", err)
	}
	if err := d.FreezeForDraftingUnless(nil); err != nil {
		t.Fatal(err)
	}
	d.Free()
}

// A new draft drawn straight into its drafting form holds what
// InitDayZero, FreezeForDrafting and DropFloat leave: the same Q8_0
// copies, bit for bit, no float32 values beside them, and Init's values
// where a parameter stays float32.
func TestDayZeroForDrafting(t *testing.T) {
	large := device.HostConfig{Threads: 1, Float32Upto: 4096}
	want, got := newInitDraftOn(t, device.NewHostWith(large)), newInitDraftOn(t, device.NewHostWith(large))
	want.InitDayZero(9)
	if err := want.FreezeForDrafting(); err != nil {
		t.Fatal(err)
	}
	want.DropFloat()
	if err := got.DayZeroForDraftingUnless(9, nil); err != nil {
		t.Fatal(err)
	}
	frozen, chunked := 0, 0
	for i, p := range got.Params {
		w := want.Params[i]
		if (p.W == nil) != (w.W == nil) || (p.Q == nil) != (w.Q == nil) {
			t.Fatalf("%s: float32 %v, Q8_0 %v; want %v, %v", p.Name, p.W != nil, p.Q != nil, w.W != nil, w.Q != nil)
		}
		if p.W != nil && !slices.Equal(paramValues(got, p), paramValues(want, w)) {
			t.Errorf("%s: float32 values differ", p.Name)
		}
		if p.Q == nil {
			continue
		}
		frozen++
		if p.Size() > initChunk {
			chunked++
		}
		if !slices.Equal(p.qt.Data, w.qt.Data) {
			t.Errorf("%s: Q8_0 copies differ", p.Name)
		}
	}
	if frozen == 0 || chunked == 0 {
		t.Fatalf("%d matrices frozen, %d of more than a chunk: the test shape is too small", frozen, chunked)
	}
	if g, w := device.Held(got.Dev), device.Held(want.Dev); g != w {
		t.Errorf("the device holds %d bytes, want %d", g, w)
	}
	calls := 0
	if err := newInitDraft(t).DayZeroForDraftingUnless(9, func() bool { calls++; return calls > len(got.Params) }); !errors.Is(err, ErrStopped) {
		t.Errorf("told to stop: %v, want ErrStopped", err)
	}
}

// A day-0 draft is Init's with every block's attn_output and ffn_down at
// zero (train's TestDayZeroTrains: training moves those off zero).
func TestInitDayZero(t *testing.T) {
	c := dgftest.TinyConfig
	target := dgftest.Target(21, c)
	d, err := NewDraft(device.NewHost(2), c, target)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := NewDraft(device.NewHost(2), c, target)
	if err != nil {
		t.Fatal(err)
	}
	d.InitDayZero(5)
	ref.Init(5)
	download := func(d *Draft, p *Param) []float32 {
		v := make([]float32, p.Size())
		d.Dev.Download(v, p.W)
		return v
	}
	isZero := func(v []float32) bool { return !slices.ContainsFunc(v, func(x float32) bool { return x != 0 }) }
	zeroed := 0
	for i, p := range d.Params {
		got, want := download(d, p), download(ref, ref.Params[i])
		branchEnd := strings.HasSuffix(p.Name, "attn_output.weight") || strings.HasSuffix(p.Name, "ffn_down.weight")
		switch {
		case branchEnd && !isZero(got):
			t.Errorf("%s not zero", p.Name)
		case branchEnd:
			zeroed++
		case !slices.Equal(got, want):
			t.Errorf("%s differs from Init's", p.Name)
		}
	}
	if zeroed != 2*c.Blocks {
		t.Fatalf("%d matrices zeroed, want %d", zeroed, 2*c.Blocks)
	}
}
