package simulate

import (
	"fmt"
	"math"
	"slices"

	"github.com/gpubot/gpubot/chart"
)

// The simulator's PNG plots, drawn by package chart.

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

// waitTicks mark a log axis of seconds with 1s, 1m, 10m, 1h, 6h, 1d, 7d.
var waitTicks = []chart.Tick{{Value: 1, Label: "1s"}, {Value: 10, Label: "10s"}, {Value: 60, Label: "1m"}, {Value: 600, Label: "10m"},
	{Value: 3600, Label: "1h"}, {Value: 6 * 3600, Label: "6h"}, {Value: 86400, Label: "1d"}, {Value: 7 * 86400, Label: "7d"}, {Value: 30 * 86400, Label: "30d"}}

// waitCDFPlot draws, per run, the share of jobs that started within a
// wait (waits under a second count as a second).
func waitCDFPlot(runs []*Run) ([]byte, error) {
	p := chart.Panel{Title: "Wait to start: share of jobs that started within a wait",
		XLabel: "wait (log scale)", YLabel: "share of jobs", LogX: true, XTicks: waitTicks, YMin: chart.At(0), YMax: chart.At(1)}
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
		pts := []chart.XY{{X: 1, Y: 0}}
		for k, x := range w {
			if k+1 < len(w) && w[k+1] == x {
				continue // one point per distinct wait
			}
			pts = append(pts, chart.XY{X: x, Y: float64(k+1) / float64(len(w))})
		}
		p.Lines = append(p.Lines, chart.Line{Name: r.Name, Points: pts, Style: i})
	}
	p.XMin, p.XMax = chart.At(1), chart.At(math.Pow(10, math.Ceil(math.Log10(hi*1.01))))
	return chart.PNG([][]chart.Panel{{p}}, 8, 5)
}

// fragmentationPlot draws fragmentation measure (a) over time, as a share
// of all GPUs (top) and of the free GPUs (bottom).
func fragmentationPlot(runs []*Run) ([]byte, error) {
	top := chart.Panel{Title: "Fragmentation over time (DESIGN.md measure (a))", YLabel: "% of all GPUs", LegendTop: true, YMin: chart.At(0)}
	bottom := chart.Panel{YLabel: "% of free GPUs", XLabel: "hours since the first submission", YMin: chart.At(0)}
	for i, r := range runs {
		if len(r.Timeline) == 0 {
			continue
		}
		var all, free []chart.XY
		for _, s := range r.Timeline {
			all = append(all, chart.XY{X: s.Hours, Y: s.FragPctAll})
			free = append(free, chart.XY{X: s.Hours, Y: s.FragPctFree})
		}
		top.Lines = append(top.Lines, chart.Line{Name: r.Name, Points: all, Style: i, Width: 1.2})
		bottom.Lines = append(bottom.Lines, chart.Line{Points: free, Style: i, Width: 1.2})
	}
	return chart.PNG([][]chart.Panel{{top}, {bottom}}, 9, 7)
}

// packingPlot draws unallocated GPUs against arrived demand per placement
// (mean over seeds, with the smallest and largest as thin lines), and the
// paper's figures as points when known.
func packingPlot(pr *PackingResult) ([]byte, error) {
	p := chart.Panel{Title: "Packing: unallocated GPUs as demand arrives (pods never leave)",
		XLabel: "arrived GPU demand, % of the cluster's GPUs", YLabel: "unallocated GPUs, % of all", LegendTop: true}
	from := 0
	if n := len(pr.Arrived); n > 0 && pr.Arrived[n-1] >= 100 {
		from = pr.Arrived[n-1] - 50 // the interesting part, as the paper shows
	}
	yMax := 0.0
	drawn := map[string]bool{} // paper curves already drawn
	for i, name := range pr.Placements {
		var mean, lo, hi []chart.XY
		for k, pt := range pr.Curves[name] {
			a := float64(pr.Arrived[k])
			if pr.Arrived[k] < from {
				continue
			}
			mean = append(mean, chart.XY{X: a, Y: pt.Unallocated.Mean})
			lo = append(lo, chart.XY{X: a, Y: pt.Unallocated.Min})
			hi = append(hi, chart.XY{X: a, Y: pt.Unallocated.Max})
			yMax = max(yMax, pt.Unallocated.Max)
		}
		p.Lines = append(p.Lines,
			chart.Line{Name: name, Points: mean, Style: i, Width: 1.8, Solid: true},
			chart.Line{Points: lo, Style: i, Width: 0.5, Solid: true},
			chart.Line{Points: hi, Style: i, Width: 0.5, Solid: true})
		if ref := pr.Reference; ref != nil {
			if pn, ok := paperNames[name]; ok && !drawn[pn] {
				drawn[pn] = true
				var pts []chart.XY
				for k, a := range ref.Arrived {
					pts = append(pts, chart.XY{X: float64(a), Y: ref.Unallocated[pn][k]})
				}
				p.Points = append(p.Points, chart.Points{Name: fmt.Sprintf("paper: %s", pn), Points: pts, Style: i})
			}
		}
	}
	p.Lines = append(p.Lines, chart.Line{Name: "ideal", Points: []chart.XY{{X: float64(from), Y: 100 - float64(from)}, {X: 100, Y: 0}}, Gray: true, Width: 1})
	yTop := math.Min(100, math.Max(5, math.Ceil(yMax*1.2)))
	if from > 0 {
		yTop = math.Min(yTop, 30)
	}
	p.YMin, p.YMax = chart.At(0), chart.At(yTop)
	return chart.PNG([][]chart.Panel{{p}}, 9, 5)
}
