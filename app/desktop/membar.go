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

// partColors colour the parts of a memory bar.
var partColors = map[string]color.NRGBA{
	"weights":     {0x1f, 0x77, 0xb4, 0xff},
	"rope table":  {0x7f, 0x7f, 0x7f, 0xff},
	"kv cache":    {0xff, 0x7f, 0x0e, 0xff},
	"scratch":     {0xbc, 0xbd, 0x22, 0xff},
	"draft":       {0x2c, 0xa0, 0x2c, 0xff},
	"trainer":     {0xd6, 0x27, 0x28, 0xff},
	"adaptation":  {0x94, 0x67, 0xbd, 0xff},
	"draft model": {0x8c, 0x56, 0x4b, 0xff},
}

// memoryBar draws one device's memory: each part of the budget on it as a
// coloured share of what the device has, and the parts named below.
func memoryBar(title string, parts []runner.Part, capacity uint64) fyne.CanvasObject {
	var used uint64
	for _, p := range parts {
		used += p.Bytes
	}
	capacity = max(capacity, used, 1)
	bar := container.New(&shareLayout{total: float32(capacity)})
	legend := container.NewHBox()
	for _, p := range parts {
		c, ok := partColors[p.Name]
		if !ok {
			c = color.NRGBA{0x55, 0x55, 0x55, 0xff}
		}
		r := canvas.NewRectangle(c)
		bar.Add(&share{Rectangle: r, bytes: float32(p.Bytes)})
		sw := canvas.NewRectangle(c)
		sw.SetMinSize(fyne.NewSize(10, 10))
		legend.Add(container.NewHBox(container.NewCenter(sw), widget.NewLabel(fmt.Sprintf("%s %s", p.Name, runner.HumanBytes(p.Bytes)))))
	}
	bg := canvas.NewRectangle(color.NRGBA{0x80, 0x80, 0x80, 0x30})
	head := widget.NewLabel(fmt.Sprintf("%s: %s of %s", title, runner.HumanBytes(used), runner.HumanBytes(capacity)))
	return container.NewVBox(head, container.NewStack(bg, bar), container.NewHScroll(legend))
}

// share is a part of a memory bar.
type share struct {
	*canvas.Rectangle
	bytes float32
}

// shareLayout lays shares side by side, each as wide as its share of total.
type shareLayout struct{ total float32 }

func (l *shareLayout) Layout(objs []fyne.CanvasObject, s fyne.Size) {
	x := float32(0)
	for _, o := range objs {
		sh, ok := o.(*share)
		if !ok {
			continue
		}
		// At least a sliver: a part too small for its share still shows.
		w := max(s.Width*sh.bytes/l.total, 3)
		sh.Move(fyne.NewPos(x, 0))
		sh.Resize(fyne.NewSize(w, s.Height))
		x += w
	}
}

func (l *shareLayout) MinSize([]fyne.CanvasObject) fyne.Size { return fyne.NewSize(200, 18) }
