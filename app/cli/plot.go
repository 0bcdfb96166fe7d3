package cli

import (
	"fmt"
	"image/color"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"dovetail/app/runner"
)

// smoothing is the moving-average window of the plotted lines: τ of one
// request is noisy (its length and text), the trend is what compares.
const smoothing = 10

// plotTau draws τ over requests, for each configuration a faint line per
// request and a bold moving average, and marks where the workload's
// domain changes.
func plotTau(path, title string, names []string, runs [][]runner.ReplayRow) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "request"
	p.Y.Label.Text = fmt.Sprintf("τ; bold: mean of the last %d in the domain", smoothing)
	p.Add(plotter.NewGrid())
	palette := []color.Color{
		color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
		color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
		color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
	}
	yMax, last := 1.0, 0
	for i, rows := range runs {
		raw, avg := make(plotter.XYs, len(rows)), make(plotter.XYs, len(rows))
		sum, from := 0.0, 0 // the average restarts where the domain changes
		for j, r := range rows {
			if j > 0 && r.Domain != rows[j-1].Domain {
				sum, from = 0, j
			}
			raw[j] = plotter.XY{X: float64(r.Request), Y: r.Tau}
			sum += r.Tau
			if j-from >= smoothing {
				sum -= rows[j-smoothing].Tau
			}
			avg[j] = plotter.XY{X: float64(r.Request), Y: sum / float64(min(j-from+1, smoothing))}
			yMax, last = max(yMax, r.Tau), max(last, r.Request)
		}
		c := palette[i%len(palette)]
		r, g, b, _ := c.RGBA()
		faint, err := plotter.NewLine(raw)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		faint.Color = color.NRGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 0x50}
		faint.Width = vg.Points(0.6)
		bold, err := plotter.NewLine(avg)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		bold.Color, bold.Width = c, vg.Points(2)
		if i >= len(palette) {
			bold.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(faint, bold)
		p.Legend.Add(names[i], bold)
	}
	var ticks []plot.Tick
	step := max(1, (last+9)/10/5*5)
	for x := 0; x <= last; x += step {
		ticks = append(ticks, plot.Tick{Value: float64(x), Label: strconv.Itoa(x)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	// Domain changes, from the first run (every run replays the same
	// requests).
	if len(runs) > 0 {
		for j := 1; j < len(runs[0]); j++ {
			if runs[0][j].Domain != runs[0][j-1].Domain {
				x := float64(runs[0][j].Request) - 0.5
				l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 1}, {X: x, Y: yMax}})
				if err != nil {
					return fmt.Errorf("plot: %w", err)
				}
				l.Color = color.Gray{Y: 0x60}
				l.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
				p.Add(l)
			}
		}
	}
	p.Legend.Top = true
	p.Y.Min = 1
	if err := p.Save(9*vg.Inch, 5*vg.Inch, path); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}
