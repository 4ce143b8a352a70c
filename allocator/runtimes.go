package allocator

import (
	"math"
	"slices"
	"strings"
	"time"
)

// Learning runtimes and arrivals for estimates: pure functions of what
// the caller recorded (the bot's finished requests, the simulator's
// finished jobs), so that the allocator still does no I/O.

// RuntimeSample is one finished run: its team (queue) and template, the
// duration it asked for and how long it actually ran.
type RuntimeSample struct {
	Team, Template    string
	Requested, Actual time.Duration
}

// LearnOptions tunes LearnRuntimes.
type LearnOptions struct {
	// Low and High are the quantiles of actual/requested that become a
	// Range's bounds; 0 means DefaultLearnOptions'.
	Low, High float64
	// Prior is how many samples the broader level's distribution counts
	// for when it is mixed into a narrower one (see RuntimeModel); 0
	// means DefaultLearnOptions'.
	Prior float64
}

// DefaultLearnOptions are LearnRuntimes' defaults. The quantiles are
// those of single runtimes; a start depends on several ends at once, so
// the posted range of starts is narrower than that of the runs.
var DefaultLearnOptions = LearnOptions{Low: 0.1, High: 0.9, Prior: 4}

// RuntimeModel is what LearnRuntimes learned: the distribution of
// actual/requested (capped at 1: runs end at their time limit) at four
// levels, each narrower one mixed with a broader prior weighing Prior
// samples:
//
//	all          the samples of every team + Prior × uniform over DefaultRange
//	template t   t's samples + Prior × all
//	team q       q's samples + Prior × all
//	q and t      their samples + Prior × (½ team q + ½ template t)
//
// so that a team with no history gets its template's runtimes (or
// everyone's), and one with a little history moves towards its own as it
// grows. With no samples at all, Range is DefaultRange.
type RuntimeModel struct {
	opts  LearnOptions
	all   []float64
	team  map[string][]float64
	tmpl  map[string][]float64
	cell  map[[2]string][]float64
	count int
	cache map[[2]string]*cellCache
}

// cellCache keeps what was worked out for one team and template: the
// mixture's distribution function, and RangeAfter's answers by the share
// of runs shorter than the elapsed fraction (all it depends on, besides
// that fraction as a floor).
type cellCache struct {
	cdf   func(float64) float64
	after map[float64]Range
}

// LearnRuntimes learns the runtime ranges of samples. Samples with a
// requested duration of 0 or less, or a negative actual one, are
// ignored.
func LearnRuntimes(samples []RuntimeSample, opts LearnOptions) *RuntimeModel {
	d := DefaultLearnOptions
	if opts.Low > 0 && opts.Low < 1 {
		d.Low = opts.Low
	}
	if opts.High > 0 && opts.High <= 1 {
		d.High = opts.High
	}
	if d.Low > d.High {
		d.Low, d.High = d.High, d.Low
	}
	if opts.Prior > 0 && !math.IsInf(opts.Prior, 0) {
		d.Prior = opts.Prior
	}
	m := &RuntimeModel{opts: d, team: map[string][]float64{}, tmpl: map[string][]float64{}, cell: map[[2]string][]float64{},
		cache: map[[2]string]*cellCache{}}
	for _, sm := range samples {
		if sm.Requested <= 0 || sm.Actual < 0 {
			continue
		}
		r := min(1, float64(sm.Actual)/float64(sm.Requested))
		m.all = append(m.all, r)
		m.team[sm.Team] = append(m.team[sm.Team], r)
		m.tmpl[sm.Template] = append(m.tmpl[sm.Template], r)
		k := [2]string{sm.Team, sm.Template}
		m.cell[k] = append(m.cell[k], r)
		m.count++
	}
	slices.Sort(m.all)
	for _, l := range []map[string][]float64{m.team, m.tmpl} {
		for _, v := range l {
			slices.Sort(v)
		}
	}
	for _, v := range m.cell {
		slices.Sort(v)
	}
	return m
}

// Samples is the number of samples learned from.
func (m *RuntimeModel) Samples() int { return m.count }

// Range is the runtime range, as a fraction of the requested duration,
// for a run of team with template.
func (m *RuntimeModel) Range(team, template string) Range {
	if m == nil || m.count == 0 {
		return DefaultRange
	}
	cdf := m.cellOf(team, template).cdf
	return Range{Low: m.quantile(cdf, m.opts.Low), High: m.quantile(cdf, m.opts.High)}
}

// RangeAfter is Range for a run that has already run for the fraction
// elapsed of its requested duration: the same quantiles of
// actual/requested among runs longer than that (so a run past what is
// usual is not taken to end at once). If none of the runs learned from
// was that long, or with no samples at all, the rest of what it asked
// for is divided as Range divides the whole: from elapsed + Low·(1 −
// elapsed) to elapsed + High·(1 − elapsed), with DefaultRange's
// fractions when nothing was learned.
func (m *RuntimeModel) RangeAfter(team, template string, elapsed float64) Range {
	if !(elapsed > 0) {
		return m.Range(team, template)
	}
	elapsed = min(elapsed, 1)
	rest := func(r Range) Range {
		return Range{Low: elapsed + r.Low*(1-elapsed), High: elapsed + r.High*(1-elapsed)}
	}
	if m == nil || m.count == 0 {
		if elapsed <= DefaultRange.Low {
			return DefaultRange
		}
		return rest(Range{Low: 0, High: 1})
	}
	c := m.cellOf(team, template)
	f0 := c.cdf(elapsed)
	if f0 >= 1-1e-9 {
		return rest(Range{Low: 0, High: 1})
	}
	r, ok := c.after[f0]
	if !ok {
		r = Range{Low: m.quantile(c.cdf, f0+m.opts.Low*(1-f0)), High: m.quantile(c.cdf, f0+m.opts.High*(1-f0))}
		c.after[f0] = r
	}
	return Range{Low: max(elapsed, r.Low), High: max(elapsed, r.High)}
}

// cellOf returns the cache of team and template.
func (m *RuntimeModel) cellOf(team, template string) *cellCache {
	k := [2]string{team, template}
	c := m.cache[k]
	if c == nil {
		c = &cellCache{cdf: m.cdf(team, template), after: map[float64]Range{}}
		m.cache[k] = c
	}
	return c
}

// The model caches what it works out per team and template: it is not
// safe for concurrent use.

// Median is the median of actual/requested for team and template (1
// with no samples: runs take what they ask for).
func (m *RuntimeModel) Median(team, template string) float64 {
	if m == nil || m.count == 0 {
		return 1
	}
	return m.quantile(m.cellOf(team, template).cdf, 0.5)
}

// cdf returns the distribution function of the mixture for the cell.
func (m *RuntimeModel) cdf(team, template string) func(float64) float64 {
	k := m.opts.Prior
	mix := func(own []float64, prior func(float64) float64) func(float64) float64 {
		n := float64(len(own))
		e := empirical(own)
		return func(v float64) float64 { return (n*e(v) + k*prior(v)) / (n + k) }
	}
	all := mix(m.all, uniformDefault)
	tm := mix(m.tmpl[template], all)
	tq := mix(m.team[team], all)
	return mix(m.cell[[2]string{team, template}], func(v float64) float64 { return (tm(v) + tq(v)) / 2 })
}

// uniformDefault is the distribution function of the root prior:
// uniform over DefaultRange.
func uniformDefault(v float64) float64 {
	lo, hi := DefaultRange.Low, DefaultRange.High
	switch {
	case v < lo:
		return 0
	case v >= hi:
		return 1
	}
	return (v - lo) / (hi - lo)
}

// empirical is the distribution function of sorted samples (0 for none).
func empirical(sorted []float64) func(float64) float64 {
	return func(v float64) float64 {
		if len(sorted) == 0 {
			return 0
		}
		i, _ := slices.BinarySearch(sorted, math.Nextafter(v, math.Inf(1)))
		return float64(i) / float64(len(sorted))
	}
}

// quantile is the smallest ratio in [0, 1] where cdf reaches q, to
// 1e-6, and 1 (the requested duration, the time limit) for q ≥ 1.
func (m *RuntimeModel) quantile(cdf func(float64) float64, q float64) float64 {
	if q >= 1 {
		return 1
	}
	lo, hi := 0.0, 1.0
	if cdf(lo) >= q {
		return lo
	}
	for hi-lo > 1e-6 {
		mid := (lo + hi) / 2
		if cdf(mid) >= q {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// ArrivalSample is one request that arrived: when, its queue and
// priority, and the GPU-hours it is expected to use (GPUs × its expected
// runtime).
type ArrivalSample struct {
	At       time.Time
	Queue    string
	Priority int32
	// Flavor is the flavor it asked for; "" for any.
	Flavor string
	// Size is the GPUs it asked for (0: not known).
	Size     int
	GPUHours float64
}

// ArrivalRate is the load of one queue's arrivals of one priority: the
// GPUs they keep busy on average (GPU-hours asked per hour), and how
// long they have been arriving (Over: from when their current burst
// began, or from the first of them in the window if they have come
// steadily, to now, at least a minute; see burstStart). Estimates take
// arrivals to go on for as long again, no longer (see
// EstimateOptions.Arrivals): a burst of a minute is not a load for the
// day. Over 0 means the whole horizon.
type ArrivalRate struct {
	Queue    string
	Priority int32
	// Flavor is the flavor the arrivals asked for; "" for any.
	Flavor string
	// Size is the GPUs each of them asked for (0: not known).
	Size int
	GPUs float64
	Over time.Duration
}

// LearnArrivals is the offered load per queue and priority over the
// window before now: the GPU-hours of the samples in (now−window, now]
// divided by the window, or by the time since the first of them if that
// is shorter (at least a minute); per queue, priority, flavor and size,
// in that order. Each rate's
// Over is the time since its own samples' current burst began (the
// change point of their rate; the first of them if it has not risen: see
// burstStart), at least a minute. Samples
// outside the window, or with GPU-hours that are not a positive number,
// are ignored. The result feeds EstimateOptions.Arrivals.
func LearnArrivals(samples []ArrivalSample, now time.Time, window time.Duration) []ArrivalRate {
	if window <= 0 {
		return nil
	}
	from := now.Add(-window)
	first := now
	type key struct {
		q string
		p int32
		f string
		n int
	}
	sum := map[key]float64{}
	timesOf := map[key][]time.Time{}
	for _, a := range samples {
		if !a.At.After(from) || a.At.After(now) || !(a.GPUHours > 0) || math.IsInf(a.GPUHours, 0) {
			continue
		}
		k := key{a.Queue, a.Priority, a.Flavor, a.Size}
		sum[k] += a.GPUHours
		timesOf[k] = append(timesOf[k], a.At)
		if a.At.Before(first) {
			first = a.At
		}
	}
	if len(sum) == 0 {
		return nil
	}
	span := max(time.Minute, min(window, now.Sub(first)))
	out := make([]ArrivalRate, 0, len(sum))
	for k, v := range sum {
		began := burstStart(sortTimes(timesOf[k]), first, now)
		out = append(out, ArrivalRate{Queue: k.q, Priority: k.p, Flavor: k.f, Size: k.n, GPUs: v / span.Hours(), Over: max(time.Minute, now.Sub(began))})
	}
	slices.SortFunc(out, func(a, b ArrivalRate) int {
		if a.Queue != b.Queue {
			return strings.Compare(a.Queue, b.Queue)
		}
		if a.Priority != b.Priority {
			return int(a.Priority) - int(b.Priority)
		}
		if a.Flavor != b.Flavor {
			return strings.Compare(a.Flavor, b.Flavor)
		}
		return a.Size - b.Size
	})
	return out
}
