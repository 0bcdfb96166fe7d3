package desktop

import (
	"image"
	"image/color"
	"math"
	"testing"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/test"

	"dovetail/app/runner"
)

// The bar's parts are drawn (fyne's painter paints them: a captured
// window shows each part's colour), each as wide as its share of the
// device's memory, and a part too small for its share still shows.
func TestMemBarDrawsShares(t *testing.T) {
	test.NewTempApp(t)
	parts := []runner.Part{{Name: "weights", Device: "cpu", Bytes: 600 << 20}, {Name: "kv cache", Device: "cpu", Bytes: 200 << 20},
		{Name: "scratch", Device: "cpu", Bytes: 1 << 10}}
	bar := newMemBar(parts, 1000<<20)
	w := test.NewWindow(bar)
	defer w.Close()
	w.SetPadded(false)
	w.Resize(fyne.NewSize(500, 20))

	objs := test.WidgetRenderer(bar).Objects()
	if len(objs) != 1+len(parts) {
		t.Fatalf("%d objects drawn for %d parts", len(objs), len(parts))
	}
	width := bar.Size().Width
	want := []float32{width * 0.6, width * 0.2, minSliver}
	x := float32(0)
	for i, o := range objs[1:] {
		r, ok := o.(*canvas.Rectangle)
		if !ok {
			t.Fatalf("part %d is a %T, which fyne's painter does not draw", i, o)
		}
		if math.Abs(float64(r.Size().Width-want[i])) > 0.5 || r.Position().X != x || r.Size().Height != bar.Size().Height {
			t.Errorf("part %s: at %v size %v, want x %.1f width %.1f of %.1f", parts[i].Name, r.Position(), r.Size(), x, want[i], width)
		}
		x += r.Size().Width
	}

	img := w.Canvas().Capture()
	for i, p := range parts[:2] {
		c := partLook(p.Name).color
		if n := countColour(img, c); n == 0 {
			t.Errorf("part %d (%s) is not drawn: no pixel of its colour", i, p.Name)
		}
	}
	weights, kv := countColour(img, partLook("weights").color), countColour(img, partLook("kv cache").color)
	if ratio := float64(weights) / float64(max(kv, 1)); ratio < 2.5 || ratio > 3.5 {
		t.Errorf("drawn pixels: weights %d, kv cache %d; want 3 to 1 as their bytes are", weights, kv)
	}
}

// A plan that needs more than the device has fills the bar, its parts in
// proportion to one another; an unknown part is grey and named in words.
func TestMemBarOverfullAndUnknown(t *testing.T) {
	test.NewTempApp(t)
	parts := []runner.Part{{Name: "weights", Bytes: 3 << 30}, {Name: "mystery", Bytes: 1 << 30}}
	bar := newMemBar(parts, 2<<30)
	w := test.NewWindow(bar)
	defer w.Close()
	w.SetPadded(false)
	w.Resize(fyne.NewSize(400, 20))
	objs := test.WidgetRenderer(bar).Objects()
	a, b := objs[1].Size().Width, objs[2].Size().Width
	if math.Abs(float64(a+b-bar.Size().Width)) > 0.5 || math.Abs(float64(a-3*b)) > 1 {
		t.Errorf("widths %.1f and %.1f of %.1f", a, b, bar.Size().Width)
	}
	if got := partLook("mystery").label; got != "Mystery" {
		t.Errorf("unknown part named %q", got)
	}
}

func countColour(img image.Image, c color.NRGBA) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.NRGBAModel.Convert(img.At(x, y)) == c {
				n++
			}
		}
	}
	return n
}

// A model that takes a sliver of the device's memory gets a second bar of
// its parts alone, filled; one that takes a fair share does not.
func TestMemoryBarZooms(t *testing.T) {
	test.NewTempApp(t)
	parts := []runner.Part{{Name: "weights", Bytes: 30 << 20}, {Name: "kv cache", Bytes: 10 << 20}}
	bars := func(capacity uint64) []*memBar {
		var out []*memBar
		for _, o := range memoryBar("CPU memory", parts, capacity).(*fyne.Container).Objects {
			if b, ok := o.(*memBar); ok {
				out = append(out, b)
			}
		}
		return out
	}
	if got := bars(100 << 20); len(got) != 1 {
		t.Errorf("40 MiB of 100 MiB: %d bars", len(got))
	}
	got := bars(20 << 30)
	if len(got) != 2 || got[1].total() != 40<<20 {
		t.Fatalf("40 MiB of 20 GiB: %d bars", len(got))
	}
}
