package simulate

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// This file is the only user of gonum/plot.

func drawPlots(rep *Report, files map[string][]byte) error {
	if rep.Mode == "packing" {
		img, err := packingPlot(rep.Packing)
		if err != nil {
			return err
		}
		files["packing.png"] = img
		return nil
	}
	img, err := waitCDFPlot(rep.Runs)
	if err != nil {
		return err
	}
	files["wait-cdf.png"] = img
	if img, err = fragmentationPlot(rep.Runs); err != nil {
		return err
	}
	files["fragmentation.png"] = img
	return nil
}

// waitTicks marks a log axis of seconds with 1s, 1m, 10m, 1h, 6h, 1d, 7d.
type waitTicks struct{}

func (waitTicks) Ticks(lo, hi float64) []plot.Tick {
	marks := []struct {
		v float64
		l string
	}{{1, "1s"}, {10, "10s"}, {60, "1m"}, {600, "10m"}, {3600, "1h"}, {6 * 3600, "6h"}, {86400, "1d"}, {7 * 86400, "7d"}, {30 * 86400, "30d"}}
	var out []plot.Tick
	for _, m := range marks {
		if m.v >= lo && m.v <= hi {
			out = append(out, plot.Tick{Value: m.v, Label: m.l})
		}
	}
	return out
}

// waitCDFPlot draws, per run, the share of jobs that started within a
// wait (waits under a second count as a second).
func waitCDFPlot(runs []*Run) ([]byte, error) {
	p := plot.New()
	p.Title.Text = "Wait to start: share of jobs that started within a wait"
	p.X.Label.Text = "wait (log scale)"
	p.Y.Label.Text = "share of jobs"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = waitTicks{}
	p.Y.Min, p.Y.Max = 0, 1
	p.Legend.Top, p.Legend.Left = false, false
	hi := 60.0
	for i, r := range runs {
		w := make([]float64, 0, len(r.Jobs))
		for _, j := range r.Jobs {
			w = append(w, max(1, j.Wait))
		}
		slices.Sort(w)
		if len(w) == 0 {
			continue
		}
		hi = max(hi, w[len(w)-1])
		var xys plotter.XYs
		xys = append(xys, plotter.XY{X: 1, Y: 0})
		for k, x := range w {
			if k+1 < len(w) && w[k+1] == x {
				continue // one point per distinct wait
			}
			xys = append(xys, plotter.XY{X: x, Y: float64(k+1) / float64(len(w))})
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			return nil, err
		}
		l.Color, l.Dashes, l.Width = plotutil.Color(i), plotutil.Dashes(i), vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(r.Name, l)
	}
	p.X.Min, p.X.Max = 1, math.Pow(10, math.Ceil(math.Log10(hi*1.01)))
	p.Add(plotter.NewGrid())
	return render([][]*plot.Plot{{p}}, 8*vg.Inch, 5*vg.Inch)
}

// fragmentationPlot draws fragmentation measure (a) over time, as a share
// of all GPUs (top) and of the free GPUs (bottom).
func fragmentationPlot(runs []*Run) ([]byte, error) {
	top, bottom := plot.New(), plot.New()
	top.Title.Text = "Fragmentation over time (DESIGN.md measure (a))"
	top.Y.Label.Text = "% of all GPUs"
	bottom.Y.Label.Text = "% of free GPUs"
	bottom.X.Label.Text = "hours since the first submission"
	for i, r := range runs {
		var all, free plotter.XYs
		for _, s := range r.Timeline {
			all = append(all, plotter.XY{X: s.Hours, Y: s.FragPctAll})
			free = append(free, plotter.XY{X: s.Hours, Y: s.FragPctFree})
		}
		if len(all) == 0 {
			continue
		}
		for _, x := range []struct {
			p   *plot.Plot
			xys plotter.XYs
		}{{top, all}, {bottom, free}} {
			l, err := plotter.NewLine(x.xys)
			if err != nil {
				return nil, err
			}
			l.Color, l.Dashes, l.Width = plotutil.Color(i), plotutil.Dashes(i), vg.Points(1.2)
			x.p.Add(l)
			if x.p == top {
				x.p.Legend.Add(r.Name, l)
			}
		}
	}
	top.Legend.Top = true
	top.Y.Min, bottom.Y.Min = 0, 0
	top.Add(plotter.NewGrid())
	bottom.Add(plotter.NewGrid())
	return render([][]*plot.Plot{{top}, {bottom}}, 9*vg.Inch, 7*vg.Inch)
}

// packingPlot draws unallocated GPUs against arrived demand per placement
// (mean over seeds, with the smallest and largest as thin lines), and the
// paper's figures as points when known.
func packingPlot(pr *PackingResult) ([]byte, error) {
	p := plot.New()
	p.Title.Text = "Packing: unallocated GPUs as demand arrives (pods never leave)"
	p.X.Label.Text = "arrived GPU demand, % of the cluster's GPUs"
	p.Y.Label.Text = "unallocated GPUs, % of all"
	p.Legend.Top = true
	from := 0
	if n := len(pr.Arrived); n > 0 && pr.Arrived[n-1] >= 100 {
		from = pr.Arrived[n-1] - 50 // the interesting part, as the paper shows
	}
	yMax := 0.0
	drawn := map[string]bool{} // paper curves already drawn
	for i, name := range pr.Placements {
		var mean, lo, hi plotter.XYs
		for k, pt := range pr.Curves[name] {
			a := float64(pr.Arrived[k])
			if pr.Arrived[k] < from {
				continue
			}
			mean = append(mean, plotter.XY{X: a, Y: pt.Unallocated.Mean})
			lo = append(lo, plotter.XY{X: a, Y: pt.Unallocated.Min})
			hi = append(hi, plotter.XY{X: a, Y: pt.Unallocated.Max})
			yMax = max(yMax, pt.Unallocated.Max)
		}
		for j, xys := range []plotter.XYs{mean, lo, hi} {
			l, err := plotter.NewLine(xys)
			if err != nil {
				return nil, err
			}
			l.Color = plotutil.Color(i)
			l.Width = vg.Points(1.8)
			if j > 0 {
				l.Width = vg.Points(0.5)
			}
			p.Add(l)
			if j == 0 {
				p.Legend.Add(name, l)
			}
		}
		if ref := pr.Reference; ref != nil {
			if pn, ok := paperNames[name]; ok && !drawn[pn] {
				drawn[pn] = true
				var pts plotter.XYs
				for k, a := range ref.Arrived {
					pts = append(pts, plotter.XY{X: float64(a), Y: ref.Unallocated[pn][k]})
				}
				sc, err := plotter.NewScatter(pts)
				if err != nil {
					return nil, err
				}
				sc.Color, sc.Shape = plotutil.Color(i), plotutil.Shape(i)
				p.Add(sc)
				p.Legend.Add(fmt.Sprintf("paper: %s", pn), sc)
			}
		}
	}
	ideal, _ := plotter.NewLine(plotter.XYs{{X: float64(from), Y: 100 - float64(from)}, {X: 100, Y: 0}})
	ideal.Color, ideal.Dashes = color.Gray{Y: 128}, []vg.Length{vg.Points(2), vg.Points(2)}
	p.Add(ideal)
	p.Legend.Add("ideal", ideal)
	p.Y.Min, p.Y.Max = 0, math.Min(100, math.Max(5, math.Ceil(yMax*1.2)))
	if from > 0 {
		p.Y.Max = math.Min(p.Y.Max, 30)
	}
	p.Add(plotter.NewGrid())
	return render([][]*plot.Plot{{p}}, 9*vg.Inch, 5*vg.Inch)
}

// render draws plots in a grid into a PNG.
func render(plots [][]*plot.Plot, w, h vg.Length) ([]byte, error) {
	img := vgimg.New(w, h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j := range plots[i] {
			plots[i][j].Draw(canvases[i][j])
		}
	}
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("encoding a plot: %w", err)
	}
	return buf.Bytes(), nil
}
