package desktop

import (
	"fmt"
	"image/color"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// lineChart draws a series over requests with fyne's canvas: a line, the
// points where the draft's version changed marked by vertical lines, and
// the last value and the range in words.
type lineChart struct {
	widget.BaseWidget
	title   string
	values  []float64
	markers []int // indices where a new draft version began
}

func newLineChart(title string) *lineChart {
	c := &lineChart{title: title}
	c.ExtendBaseWidget(c)
	return c
}

// set replaces the series.
func (c *lineChart) set(values []float64, markers []int) {
	c.values, c.markers = values, markers
	c.Refresh()
}

func (c *lineChart) CreateRenderer() fyne.WidgetRenderer {
	r := &chartRenderer{c: c, title: canvas.NewText("", theme.Color(theme.ColorNameForeground)),
		frame: canvas.NewRectangle(color.Transparent)}
	r.title.TextSize = theme.TextSize() * 0.9
	r.frame.StrokeColor = theme.Color(theme.ColorNameSeparator)
	r.frame.StrokeWidth = 1
	r.Refresh()
	return r
}

type chartRenderer struct {
	c       *lineChart
	title   *canvas.Text
	frame   *canvas.Rectangle
	lines   []fyne.CanvasObject
	size    fyne.Size
	objects []fyne.CanvasObject
}

func (r *chartRenderer) MinSize() fyne.Size { return fyne.NewSize(240, 140) }

func (r *chartRenderer) Layout(s fyne.Size) {
	r.size = s
	r.Refresh()
}

func (r *chartRenderer) Objects() []fyne.CanvasObject { return r.objects }
func (r *chartRenderer) Destroy()                     {}

// Refresh rebuilds the lines for the current size and values.
func (r *chartRenderer) Refresh() {
	c, s := r.c, r.size
	head := float32(22)
	r.frame.Move(fyne.NewPos(0, head))
	r.frame.Resize(fyne.NewSize(s.Width, max(s.Height-head, 1)))
	r.lines = r.lines[:0]
	lo, hi := 0.0, 1.0
	for i, v := range c.values {
		if i == 0 || v < lo {
			lo = v
		}
		hi = max(hi, v)
	}
	lo = min(lo, 0)
	r.title.Text = c.title
	if n := len(c.values); n > 0 {
		r.title.Text = fmt.Sprintf("%s: %.2f (%s, %.2f–%.2f)", c.title, c.values[n-1], plural(n, "request"), lo, hi)
	}
	w, h := s.Width-8, s.Height-head-8
	x := func(i int) float32 { return 4 + w*float32(i)/float32(max(len(c.values)-1, 1)) }
	y := func(v float64) float32 { return head + 4 + h*float32(1-(v-lo)/max(hi-lo, 1e-9)) }
	for _, m := range c.markers {
		l := canvas.NewLine(theme.Color(theme.ColorNameWarning))
		l.StrokeWidth = 1
		l.Position1, l.Position2 = fyne.NewPos(x(m), head), fyne.NewPos(x(m), s.Height)
		r.lines = append(r.lines, l)
	}
	for i := 1; i < len(c.values); i++ {
		l := canvas.NewLine(theme.Color(theme.ColorNamePrimary))
		l.StrokeWidth = 2
		l.Position1, l.Position2 = fyne.NewPos(x(i-1), y(c.values[i-1])), fyne.NewPos(x(i), y(c.values[i]))
		r.lines = append(r.lines, l)
	}
	if len(c.values) == 1 {
		d := canvas.NewCircle(theme.Color(theme.ColorNamePrimary))
		d.Move(fyne.NewPos(x(0)-3, y(c.values[0])-3))
		d.Resize(fyne.NewSize(6, 6))
		r.lines = append(r.lines, d)
	}
	r.objects = append([]fyne.CanvasObject{r.frame, r.title}, r.lines...)
	canvas.Refresh(r.c)
}
