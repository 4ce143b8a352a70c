package digest

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/gpubot/gpubot/chart"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// chartSeries is how many teams or people the chart shows by name; the
// rest are stacked as "others".
const chartSeries = 6

// chartData is what the digest's chart shows: per day of the last week,
// GPU-hours by team (or person) and the p95 wait by priority.
type chartData struct {
	title  string
	days   []string             // labels, oldest first
	hours  map[string][]float64 // key → GPU-hours per day
	keys   []string             // stacking order, largest first
	p95    map[string][]time.Duration
	prios  []string         // highest first
	waited map[string][]int // priority → waits counted per day
}

// dailyChart draws the week that ends with the digest's day.
func (e *Engine) dailyChart(d *daily, use []records.UsageRecord, reqs, scoped []records.Request) (*commands.Image, error) {
	cd := chartData{hours: map[string][]float64{}, p95: map[string][]time.Duration{}, waited: map[string][]int{}}
	by := "team"
	key := func(t, _ string) string { return t }
	if d.team != "" {
		by = "person"
		key = func(t, person string) string {
			if t != d.team {
				return ""
			}
			return person
		}
	}
	cd.title = fmt.Sprintf("GPU-hours by %s and p95 wait by priority, %s, %s to %s", by, d.scope(), date(d.day.to.AddDate(0, 0, -7), d.loc), date(d.day.from, d.loc))
	totals := map[string]float64{}
	for i := 7; i >= 1; i-- {
		p := period{from: d.day.to.AddDate(0, 0, -i), to: d.day.to.AddDate(0, 0, -i+1)}
		cd.days = append(cd.days, p.from.In(d.loc).Format("Mon 2"))
		h := gpuHours(use, reqs, d.now, p, key)
		delete(h, "")
		for k, v := range h {
			if cd.hours[k] == nil {
				cd.hours[k] = make([]float64, 7)
			}
			cd.hours[k][7-i] = v
			totals[k] += v
		}
		for prio, st := range byPriority(waitsIn(scoped, p)) {
			if cd.p95[prio] == nil {
				cd.p95[prio], cd.waited[prio] = make([]time.Duration, 7), make([]int, 7)
			}
			cd.p95[prio][7-i], cd.waited[prio][7-i] = st.p95, st.n
		}
	}
	for k := range cd.hours {
		cd.keys = append(cd.keys, k)
	}
	sort.Slice(cd.keys, func(i, j int) bool {
		if totals[cd.keys[i]] != totals[cd.keys[j]] {
			return totals[cd.keys[i]] > totals[cd.keys[j]]
		}
		return cd.keys[i] < cd.keys[j]
	})
	if len(cd.keys) > chartSeries {
		others := make([]float64, 7)
		for _, k := range cd.keys[chartSeries-1:] {
			for i, v := range cd.hours[k] {
				others[i] += v
			}
			delete(cd.hours, k)
		}
		cd.keys = append(cd.keys[:chartSeries-1], "others")
		cd.hours["others"] = others
	}
	for i := len(e.set.Priorities) - 1; i >= 0; i-- {
		if p := e.set.Priorities[i].Name; cd.p95[p] != nil {
			cd.prios = append(cd.prios, p)
		}
	}
	png, err := cd.draw()
	if err != nil {
		return nil, err
	}
	name := "gpubot-digest-cluster-" + d.day.from.In(d.loc).Format("2006-01-02") + ".png"
	if d.team != "" {
		name = "gpubot-digest-" + d.team + "-" + d.day.from.In(d.loc).Format("2006-01-02") + ".png"
	}
	return &commands.Image{Name: name, Title: cd.title, PNG: png, Alt: cd.alt()}, nil
}

// alt is the chart in words: its numbers, for the text fallback.
func (cd chartData) alt() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s.\nGPU-hours per day (%s):\n", cd.title, strings.Join(cd.days, ", "))
	for _, k := range cd.keys {
		vals := make([]string, len(cd.hours[k]))
		for i, v := range cd.hours[k] {
			vals[i] = fmt.Sprintf("%.0f", v)
		}
		fmt.Fprintf(&b, "  %s: %s\n", k, strings.Join(vals, ", "))
	}
	if len(cd.prios) == 0 {
		b.WriteString("Nothing waited for GPUs in these days.\n")
		return b.String()
	}
	b.WriteString("p95 wait per day (– when nothing waited):\n")
	for _, p := range cd.prios {
		vals := make([]string, len(cd.p95[p]))
		for i, v := range cd.p95[p] {
			vals[i] = "–"
			if cd.waited[p][i] > 0 {
				vals[i] = fmtDur(v)
			}
		}
		fmt.Fprintf(&b, "  %s: %s\n", p, strings.Join(vals, ", "))
	}
	return b.String()
}

// draw renders the chart: stacked GPU-hours bars above, grouped p95 wait
// bars below.
func (cd chartData) draw() ([]byte, error) {
	top := chart.Panel{Title: cd.title, YLabel: "GPU-hours", Categories: cd.days,
		LegendTop: true, LegendLeft: true, YMin: chart.At(0), YHeadroom: 0.15} // room for the legend
	for i, k := range cd.keys {
		top.Bars = append(top.Bars, chart.Bars{Name: k, Values: cd.hours[k], Style: i, Width: 28, Stacked: true})
	}
	unit, name := time.Minute, "minutes"
	for _, p := range cd.prios {
		for _, v := range cd.p95[p] {
			if v >= 2*time.Hour {
				unit, name = time.Hour, "hours"
			}
		}
	}
	bottom := chart.Panel{YLabel: "p95 wait, " + name, Categories: cd.days,
		LegendTop: true, LegendLeft: true, YMin: chart.At(0), YHeadroom: 0.15}
	for i, p := range cd.prios {
		vals := make([]float64, len(cd.p95[p]))
		for j, v := range cd.p95[p] {
			vals[j] = float64(v) / float64(unit)
		}
		bottom.Bars = append(bottom.Bars, chart.Bars{Name: p, Values: vals, Style: i + 3, Width: 10})
	}
	if len(cd.prios) == 0 {
		bottom.Title = "nothing waited for GPUs"
	}
	return chart.PNG([][]chart.Panel{{top}, {bottom}}, 8, 7)
}
