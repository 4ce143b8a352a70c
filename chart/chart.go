// Package chart draws gpubot's PNG charts: the digest's GPU-hours and
// waits, and the trace simulator's wait CDF, fragmentation and packing
// curves. It is the only importer of gonum.org/v1/plot; callers describe
// panels of lines, points and bars in plain data and get PNG bytes back.
//
// # Basics
//
// A chart is a grid of Panels (rows of columns) drawn on one canvas of a
// given size, with the panels' plotting areas aligned:
//
//	png, err := chart.PNG([][]chart.Panel{{{
//		Title: "Waits", YLabel: "share of jobs",
//		Lines: []chart.Line{{Name: "gpubot", Points: pts}},
//	}}}, 8, 5)
//
// A panel with Categories has a nominal X axis (bars at 0, 1, …, labelled
// by the categories); Bars in one Stack group are stacked in the order
// given, bars not stacked are grouped side by side around each category.
//
// # Caveats
//
// Colours, dashes and point shapes come from gonum's plotutil palettes by
// index (Style), so a series keeps its look across panels when the caller
// gives it the same Style. Limits left nil are gonum's automatic ones.
package chart

import (
	"bytes"
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// XY is one point.
type XY struct{ X, Y float64 }

// Tick is a labelled mark on an axis.
type Tick struct {
	Value float64
	Label string
}

// Line is a series of points joined by a line.
type Line struct {
	// Name is shown in the legend; "" leaves the line out of it.
	Name   string
	Points []XY
	// Style picks the colour and dash pattern from the palettes.
	Style int
	// Width in points; 0 is 1.5.
	Width float64
	// Solid draws without the style's dashes; Gray draws a gray dashed
	// reference line (the style is then ignored).
	Solid, Gray bool
}

// Points is a series of unjoined points.
type Points struct {
	Name   string
	Points []XY
	Style  int
}

// Bars is one value per category.
type Bars struct {
	// Name is shown in the legend; "" leaves the bars out of it.
	Name   string
	Values []float64
	Style  int
	// Width in points; 0 is 10.
	Width float64
	// Stacked bars are drawn on top of the previous stacked bars of the
	// panel; the others are grouped side by side.
	Stacked bool
}

// Panel is one plot.
type Panel struct {
	Title, XLabel, YLabel string
	// Categories make the X axis nominal (for bars).
	Categories []string
	// LogX uses a logarithmic X axis; XTicks, if set, are its marks.
	LogX   bool
	XTicks []Tick
	// Axis limits; nil is automatic. YHeadroom > 0 raises the automatic
	// Y maximum by that fraction (room for the legend).
	XMin, XMax, YMin, YMax *float64
	YHeadroom              float64
	// LegendTop and LegendLeft place the legend (default bottom right).
	LegendTop, LegendLeft bool
	Lines                 []Line
	Points                []Points
	Bars                  []Bars
}

// At returns a pointer to v, for the limits of a Panel.
func At(v float64) *float64 { return &v }

// PNG draws the panels, row by row, on a canvas of w × h inches.
func PNG(rows [][]Panel, w, h float64) ([]byte, error) {
	if len(rows) == 0 || len(rows[0]) == 0 {
		return nil, fmt.Errorf("drawing a chart: no panels")
	}
	plots := make([][]*plot.Plot, len(rows))
	for i, row := range rows {
		for _, pn := range row {
			p, err := pn.plot()
			if err != nil {
				return nil, fmt.Errorf("drawing %q: %w", pn.Title, err)
			}
			plots[i] = append(plots[i], p)
		}
	}
	img := vgimg.New(vg.Length(w)*vg.Inch, vg.Length(h)*vg.Inch)
	tiles := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 6,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align(plots, tiles, draw.New(img))
	for i := range plots {
		for j := range plots[i] {
			plots[i][j].Draw(canvases[i][j])
		}
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("encoding a chart: %w", err)
	}
	return buf.Bytes(), nil
}

type ticks []Tick

func (t ticks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for _, m := range t {
		if m.Value >= lo && m.Value <= hi {
			out = append(out, plot.Tick{Value: m.Value, Label: m.Label})
		}
	}
	return out
}

func (pn Panel) plot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = pn.Title, pn.XLabel, pn.YLabel
	p.Legend.Top, p.Legend.Left = pn.LegendTop, pn.LegendLeft
	if len(pn.Categories) > 0 {
		p.NominalX(pn.Categories...)
	}
	if pn.LogX {
		p.X.Scale = plot.LogScale{}
	}
	if len(pn.XTicks) > 0 {
		p.X.Tick.Marker = ticks(pn.XTicks)
	}
	var below *plotter.BarChart
	var grouped []Bars
	for _, b := range pn.Bars {
		if !b.Stacked {
			grouped = append(grouped, b)
			continue
		}
		bars, err := bar(b)
		if err != nil {
			return nil, err
		}
		if below != nil {
			bars.StackOn(below)
		}
		below = bars
		p.Add(bars)
		if b.Name != "" {
			p.Legend.Add(b.Name, bars)
		}
	}
	for i, b := range grouped {
		bars, err := bar(b)
		if err != nil {
			return nil, err
		}
		bars.Offset = bars.Width * vg.Length(float64(i)-float64(len(grouped)-1)/2)
		p.Add(bars)
		if b.Name != "" {
			p.Legend.Add(b.Name, bars)
		}
	}
	for _, l := range pn.Lines {
		xys := toXYs(l.Points)
		line, err := plotter.NewLine(xys)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", l.Name, err)
		}
		line.Width = vg.Points(1.5)
		if l.Width > 0 {
			line.Width = vg.Points(l.Width)
		}
		switch {
		case l.Gray:
			line.Color, line.Dashes = color.Gray{Y: 128}, []vg.Length{vg.Points(2), vg.Points(2)}
		case l.Solid:
			line.Color = plotutil.Color(l.Style)
		default:
			line.Color, line.Dashes = plotutil.Color(l.Style), plotutil.Dashes(l.Style)
		}
		p.Add(line)
		if l.Name != "" {
			p.Legend.Add(l.Name, line)
		}
	}
	for _, s := range pn.Points {
		xys := toXYs(s.Points)
		sc, err := plotter.NewScatter(xys)
		if err != nil {
			return nil, fmt.Errorf("points %q: %w", s.Name, err)
		}
		sc.Color, sc.Shape = plotutil.Color(s.Style), plotutil.Shape(s.Style)
		p.Add(sc)
		if s.Name != "" {
			p.Legend.Add(s.Name, sc)
		}
	}
	p.Add(plotter.NewGrid())
	if pn.YHeadroom > 0 {
		p.Y.Max = max(p.Y.Max*(1+pn.YHeadroom), 1)
	}
	if len(pn.Categories) > 0 {
		p.X.Min, p.X.Max = -0.6, float64(len(pn.Categories))-0.4
	}
	set := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&p.X.Min, pn.XMin)
	set(&p.X.Max, pn.XMax)
	set(&p.Y.Min, pn.YMin)
	set(&p.Y.Max, pn.YMax)
	return p, nil
}

func bar(b Bars) (*plotter.BarChart, error) {
	w := vg.Points(10)
	if b.Width > 0 {
		w = vg.Points(b.Width)
	}
	bars, err := plotter.NewBarChart(plotter.Values(b.Values), w)
	if err != nil {
		return nil, fmt.Errorf("bars %q: %w", b.Name, err)
	}
	bars.Color = plotutil.Color(b.Style)
	bars.LineStyle.Width = 0
	return bars, nil
}

func toXYs(pts []XY) plotter.XYs {
	xys := make(plotter.XYs, len(pts))
	for i, pt := range pts {
		xys[i] = plotter.XY{X: pt.X, Y: pt.Y}
	}
	return xys
}
