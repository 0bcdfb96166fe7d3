package desktop

import (
	"image/color"
	"math"
	"strconv"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// marker is a vertical line at a reply, named: where a draft version took
// over.
type marker struct {
	at    int
	label string
}

// lineChart draws a series over replies with fyne's canvas: a line (a
// gap where a reply has no value: NaN), its axes with their ranges, a
// line at each marker with its name, and a summary above. Without
// values it says why in words (empty).
type lineChart struct {
	widget.BaseWidget
	title   string // the y axis: what is charted, with its unit
	summary string // the last value and the counts, in words
	empty   string // shown when there are no values
	values  []float64
	markers []marker
}

func newLineChart(title string) *lineChart {
	c := &lineChart{title: title}
	c.ExtendBaseWidget(c)
	return c
}

// set replaces the series, its markers and words.
func (c *lineChart) set(values []float64, markers []marker, summary, empty string) {
	c.values, c.markers, c.summary, c.empty = values, markers, summary, empty
	c.Refresh()
}

// points is how many values the chart has (NaN: none).
func (c *lineChart) points() int {
	n := 0
	for _, v := range c.values {
		if !math.IsNaN(v) {
			n++
		}
	}
	return n
}

func (c *lineChart) CreateRenderer() fyne.WidgetRenderer {
	r := &chartRenderer{c: c, title: chartText(1), frame: canvas.NewRectangle(color.Transparent)}
	r.frame.StrokeColor = theme.Color(theme.ColorNameSeparator)
	r.frame.StrokeWidth = 1
	r.Refresh()
	return r
}

// chartText is a text of the chart, scale times the theme's caption size.
func chartText(scale float32) *canvas.Text {
	t := canvas.NewText("", theme.Color(theme.ColorNameForeground))
	t.TextSize = theme.CaptionTextSize() * scale
	return t
}

type chartRenderer struct {
	c       *lineChart
	title   *canvas.Text
	frame   *canvas.Rectangle
	size    fyne.Size
	objects []fyne.CanvasObject
}

func (r *chartRenderer) MinSize() fyne.Size { return fyne.NewSize(260, 170) }

func (r *chartRenderer) Layout(s fyne.Size) {
	r.size = s
	r.Refresh()
}

func (r *chartRenderer) Objects() []fyne.CanvasObject { return r.objects }
func (r *chartRenderer) Destroy()                     {}

// The plot's margins: the title above, the x axis's labels below, the y
// axis's on the left.
const chartHead, chartFoot, chartLeft = float32(22), float32(18), float32(48)

// Refresh rebuilds the objects for the current size and values.
func (r *chartRenderer) Refresh() {
	c, s := r.c, r.size
	pw, ph := max(s.Width-chartLeft-4, 1), max(s.Height-chartHead-chartFoot, 1)
	r.frame.Move(fyne.NewPos(chartLeft, chartHead))
	r.frame.Resize(fyne.NewSize(pw, ph))
	r.title.Text = c.title
	if c.summary != "" {
		r.title.Text = c.title + ": " + c.summary
	}
	r.objects = []fyne.CanvasObject{r.frame, r.title}
	if c.points() == 0 {
		msg := chartText(1)
		msg.Text = c.empty
		msg.Move(fyne.NewPos(chartLeft+8, chartHead+ph/2-msg.MinSize().Height/2))
		r.objects = append(r.objects, msg)
		canvas.Refresh(r.c)
		return
	}
	lo, hi := valueRange(c.values)
	n := len(c.values)
	x := func(i int) float32 { return chartLeft + 4 + (pw-8)*float32(i)/float32(max(n-1, 1)) }
	y := func(v float64) float32 { return chartHead + 4 + (ph-8)*float32(1-(v-lo)/max(hi-lo, 1e-9)) }
	r.axes(lo, hi, n, ph)
	for _, m := range c.markers {
		l := canvas.NewLine(theme.Color(theme.ColorNameWarning))
		l.StrokeWidth = 1
		l.Position1, l.Position2 = fyne.NewPos(x(m.at), chartHead), fyne.NewPos(x(m.at), chartHead+ph)
		name := chartText(0.9)
		name.Text, name.Color = m.label, theme.Color(theme.ColorNameWarning)
		name.Move(fyne.NewPos(x(m.at)+2, chartHead))
		r.objects = append(r.objects, l, name)
	}
	for i, v := range c.values {
		if math.IsNaN(v) {
			continue
		}
		if i > 0 && !math.IsNaN(c.values[i-1]) {
			l := canvas.NewLine(theme.Color(theme.ColorNamePrimary))
			l.StrokeWidth = 2
			l.Position1, l.Position2 = fyne.NewPos(x(i-1), y(c.values[i-1])), fyne.NewPos(x(i), y(v))
			r.objects = append(r.objects, l)
		}
		d := canvas.NewCircle(theme.Color(theme.ColorNamePrimary))
		d.Move(fyne.NewPos(x(i)-2.5, y(v)-2.5))
		d.Resize(fyne.NewSize(5, 5))
		r.objects = append(r.objects, d)
	}
	canvas.Refresh(r.c)
}

// axes labels the y axis with its range and the x axis with the first
// and last reply.
func (r *chartRenderer) axes(lo, hi float64, n int, ph float32) {
	top, bottom := chartText(1), chartText(1)
	top.Text, bottom.Text = formatRate(hi), formatRate(lo)
	top.Alignment, bottom.Alignment = fyne.TextAlignTrailing, fyne.TextAlignTrailing
	top.Move(fyne.NewPos(0, chartHead))
	top.Resize(fyne.NewSize(chartLeft-4, top.MinSize().Height))
	bottom.Move(fyne.NewPos(0, chartHead+ph-bottom.MinSize().Height))
	bottom.Resize(fyne.NewSize(chartLeft-4, bottom.MinSize().Height))
	first, last, caption := chartText(1), chartText(1), chartText(1)
	first.Text, caption.Text = "1", "Reply"
	last.Text = strconv.Itoa(n)
	first.Move(fyne.NewPos(chartLeft, chartHead+ph))
	last.Alignment = fyne.TextAlignTrailing
	last.Move(fyne.NewPos(chartLeft, chartHead+ph))
	last.Resize(fyne.NewSize(r.size.Width-chartLeft-4, last.MinSize().Height))
	caption.Alignment = fyne.TextAlignCenter
	caption.Move(fyne.NewPos(chartLeft, chartHead+ph))
	caption.Resize(fyne.NewSize(r.size.Width-chartLeft-4, caption.MinSize().Height))
	r.objects = append(r.objects, top, bottom, first, last, caption)
}

// valueRange is the y axis's range: from zero (or the lowest value, if
// negative) to the highest, at least 1.
func valueRange(values []float64) (lo, hi float64) {
	lo, hi = 0, 1
	for _, v := range values {
		if !math.IsNaN(v) {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	return lo, hi
}
