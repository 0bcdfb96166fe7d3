package cli

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// plotTau draws τ over requests, a line for each configuration, and
// marks where the workload's domain changes.
func plotTau(path, title string, names []string, runs [][]adaptRow) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "request"
	p.Y.Label.Text = "τ (tokens per round)"
	p.Add(plotter.NewGrid())
	palette := []color.Color{
		color.RGBA{0x1f, 0x77, 0xb4, 0xff}, color.RGBA{0xd6, 0x27, 0x28, 0xff}, color.RGBA{0x2c, 0xa0, 0x2c, 0xff},
		color.RGBA{0xff, 0x7f, 0x0e, 0xff}, color.RGBA{0x94, 0x67, 0xbd, 0xff}, color.RGBA{0x8c, 0x56, 0x4b, 0xff},
		color.RGBA{0xe3, 0x77, 0xc2, 0xff}, color.RGBA{0x7f, 0x7f, 0x7f, 0xff},
	}
	yMax := 1.0
	for i, rows := range runs {
		pts := make(plotter.XYs, len(rows))
		for j, r := range rows {
			pts[j] = plotter.XY{X: float64(r.Request), Y: r.Tau}
			yMax = max(yMax, r.Tau)
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.5)
		if i >= len(palette) {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l)
		p.Legend.Add(names[i], l)
	}
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
