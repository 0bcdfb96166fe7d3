package desktop

import (
	"fmt"
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/widget"

	"dovetail/app/runner"
)

// memoryPart is how the bar names and colours a part of the budget.
type memoryPart struct {
	label string
	color color.NRGBA
}

// memoryParts name the runner's parts in words (its names are
// lower-case keys) and colour them.
var memoryParts = map[string]memoryPart{
	"weights":     {"Weights", color.NRGBA{0x1f, 0x77, 0xb4, 0xff}},
	"rope table":  {"RoPE table", color.NRGBA{0x7f, 0x7f, 0x7f, 0xff}},
	"kv cache":    {"KV cache", color.NRGBA{0xff, 0x7f, 0x0e, 0xff}},
	"scratch":     {"Scratch", color.NRGBA{0xbc, 0xbd, 0x22, 0xff}},
	"draft":       {"Draft", color.NRGBA{0x2c, 0xa0, 0x2c, 0xff}},
	"trainer":     {"Trainer", color.NRGBA{0xd6, 0x27, 0x28, 0xff}},
	"adaptation":  {"Adaptation", color.NRGBA{0x94, 0x67, 0xbd, 0xff}},
	"draft model": {"Draft model", color.NRGBA{0x8c, 0x56, 0x4b, 0xff}},
}

// partLook is a part's words and colour; a part the bar does not know is
// grey, its name as the runner gives it.
func partLook(name string) memoryPart {
	if p, ok := memoryParts[name]; ok {
		return p
	}
	return memoryPart{sentenceCase(name), color.NRGBA{0x55, 0x55, 0x55, 0xff}}
}

// memoryBar draws one device's memory: its title with what is used of
// what the device has, the bar, and the parts named below it.
func memoryBar(title string, parts []runner.Part, capacity uint64) fyne.CanvasObject {
	bar := newMemBar(parts, capacity)
	legend := container.NewHBox()
	for _, p := range parts {
		look := partLook(p.Name)
		sw := canvas.NewRectangle(look.color)
		sw.SetMinSize(fyne.NewSize(10, 10))
		legend.Add(container.NewHBox(container.NewCenter(sw), widget.NewLabel(fmt.Sprintf("%s %s", look.label, runner.HumanBytes(p.Bytes)))))
	}
	head := widget.NewLabel(fmt.Sprintf("%s: %s of %s", title, runner.HumanBytes(bar.used()), runner.HumanBytes(bar.total())))
	box := container.NewVBox(head, bar)
	if bar.used()*zoomBelow < bar.total() {
		// Slivers on the device's bar: the parts also fill a bar of
		// their own, so that they can be told apart.
		box.Add(newMemBar(parts, 0))
	}
	box.Add(container.NewHScroll(legend))
	return box
}

// zoomBelow: a device's bar whose parts take less than 1/zoomBelow of it
// gets a second bar of the parts alone.
const zoomBelow = 10

// memBar is the bar itself: each part a coloured share of the device's
// memory over a grey strip, drawn by a renderer of its own as fyne's
// ProgressBar is (fyne's painter draws only its own canvas types: a type
// that wraps one is not drawn).
type memBar struct {
	widget.BaseWidget
	parts    []runner.Part
	capacity uint64
}

func newMemBar(parts []runner.Part, capacity uint64) *memBar {
	b := &memBar{parts: parts, capacity: capacity}
	b.ExtendBaseWidget(b)
	return b
}

// used is the parts' bytes together.
func (b *memBar) used() uint64 {
	var n uint64
	for _, p := range b.parts {
		n += p.Bytes
	}
	return n
}

// total is what the bar's width stands for: the capacity, or what is used
// where that is more (a plan that does not fit fills the bar).
func (b *memBar) total() uint64 { return max(b.capacity, b.used(), 1) }

func (b *memBar) CreateRenderer() fyne.WidgetRenderer {
	r := &memBarRenderer{bar: b, background: canvas.NewRectangle(color.NRGBA{0x80, 0x80, 0x80, 0x30})}
	r.makeSegments()
	return r
}

// memBarRenderer lays the parts side by side, each as wide as its share.
type memBarRenderer struct {
	bar        *memBar
	background *canvas.Rectangle
	segments   []*canvas.Rectangle
}

// minSliver is the width of a part too small for its share: it still shows.
const minSliver = 3

func (r *memBarRenderer) makeSegments() {
	r.segments = r.segments[:0]
	for _, p := range r.bar.parts {
		r.segments = append(r.segments, canvas.NewRectangle(partLook(p.Name).color))
	}
}

func (r *memBarRenderer) Layout(size fyne.Size) {
	r.background.Move(fyne.NewPos(0, 0))
	r.background.Resize(size)
	total := float32(r.bar.total())
	x := float32(0)
	for i, p := range r.bar.parts {
		w := max(size.Width*float32(p.Bytes)/total, minSliver)
		w = min(w, max(size.Width-x, 0)) // slivers never push a part past the end
		r.segments[i].Move(fyne.NewPos(x, 0))
		r.segments[i].Resize(fyne.NewSize(w, size.Height))
		x += w
	}
}

func (r *memBarRenderer) MinSize() fyne.Size { return fyne.NewSize(200, 18) }

func (r *memBarRenderer) Refresh() {
	if len(r.segments) != len(r.bar.parts) {
		r.makeSegments()
	}
	for i, p := range r.bar.parts {
		r.segments[i].FillColor = partLook(p.Name).color
	}
	r.Layout(r.bar.Size())
	canvas.Refresh(r.bar)
}

func (r *memBarRenderer) Objects() []fyne.CanvasObject {
	objs := []fyne.CanvasObject{r.background}
	for _, s := range r.segments {
		objs = append(objs, s)
	}
	return objs
}

func (r *memBarRenderer) Destroy() {}
