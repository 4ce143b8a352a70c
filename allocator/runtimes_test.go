package allocator

import (
	"math"
	"testing"
	"time"
)

func near2(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestLearnRuntimesLevels(t *testing.T) {
	if r := LearnRuntimes(nil, LearnOptions{}).Range("a", "x"); r != DefaultRange {
		t.Errorf("no history: %+v; want DefaultRange", r)
	}
	var samples []RuntimeSample
	// Team a, template train: 100 runs at 0.21, 0.22, … 1.2 of an hour
	// asked (the last ones over: capped at 1).
	for i := range 100 {
		samples = append(samples, RuntimeSample{Team: "a", Template: "train", Requested: time.Hour,
			Actual: time.Duration(float64(time.Hour) * (0.21 + float64(i)/100))})
	}
	// Team b, template eval: 50 runs at 0.1 of what they asked.
	for range 50 {
		samples = append(samples, RuntimeSample{Team: "b", Template: "eval", Requested: 10 * time.Hour, Actual: time.Hour})
	}
	// Bad samples are ignored.
	samples = append(samples, RuntimeSample{Team: "b", Template: "eval", Requested: 0, Actual: time.Hour},
		RuntimeSample{Team: "b", Template: "eval", Requested: time.Hour, Actual: -time.Hour})
	m := LearnRuntimes(samples, LearnOptions{})
	if m.Samples() != 150 {
		t.Errorf("Samples() = %d; want 150", m.Samples())
	}
	// Plenty of history: close to the team's own quantiles.
	if r := m.Range("a", "train"); !near2(r.Low, 0.31, 0.04) || !near2(r.High, 1, 0.001) {
		t.Errorf("a/train: %+v; want about 0.31 … 1", r)
	}
	if r := m.Range("b", "eval"); !near2(r.Low, 0.1, 1e-3) || !near2(r.High, 0.1, 1e-3) {
		t.Errorf("b/eval: %+v; want 0.1 … 0.1", r)
	}
	// A new team with template eval: the template's runs, mixed with
	// everyone's for its own (empty) history.
	r := m.Range("new", "eval")
	if !(r.Low <= 0.1+1e-3) || !(r.High > 0.1) || r.High > 1 {
		t.Errorf("new/eval: %+v; want from about 0.1 up", r)
	}
	// A new team and template: everyone's.
	all := m.Range("new", "other")
	if !near2(all.Low, 0.1, 1e-3) || !near2(all.High, 1, 0.001) {
		t.Errorf("new/other: %+v; want everyone's 0.1 … 1", all)
	}
	// Medians: b's runs take a tenth, a's about 0.7.
	if md := m.Median("b", "eval"); !near2(md, 0.1, 1e-3) {
		t.Errorf("median b/eval %v", md)
	}
	if md := m.Median("a", "train"); !near2(md, 0.71, 0.03) {
		t.Errorf("median a/train %v", md)
	}
}

// TestLearnRuntimesPrior: with one run of its own a team is mostly the
// prior; with many, mostly itself.
func TestLearnRuntimesPrior(t *testing.T) {
	base := []RuntimeSample{}
	for range 200 {
		base = append(base, RuntimeSample{Team: "old", Template: "", Requested: time.Hour, Actual: time.Hour})
	}
	one := append(append([]RuntimeSample(nil), base...), RuntimeSample{Team: "new", Requested: time.Hour, Actual: 6 * time.Minute})
	if r := LearnRuntimes(one, LearnOptions{}).Range("new", ""); r.High != 1 {
		t.Errorf("one short run: %+v; want the prior's high end (1)", r)
	}
	many := append([]RuntimeSample(nil), base...)
	for range 200 {
		many = append(many, RuntimeSample{Team: "new", Requested: time.Hour, Actual: 6 * time.Minute})
	}
	if r := LearnRuntimes(many, LearnOptions{}).Range("new", ""); !near2(r.High, 0.1, 1e-3) || !near2(r.Low, 0.1, 1e-3) {
		t.Errorf("200 short runs: %+v; want 0.1 … 0.1", r)
	}
	// Options: other quantiles, and a stronger prior.
	wide := LearnRuntimes(many, LearnOptions{Low: 0.05, High: 0.95, Prior: 1000}).Range("new", "")
	if wide.High != 1 {
		t.Errorf("a strong prior: %+v; want its high end", wide)
	}
}

func TestLearnArrivals(t *testing.T) {
	now := t0
	samples := []ArrivalSample{
		{At: now.Add(-30 * time.Hour), Queue: "a", Priority: 1, GPUHours: 1000}, // outside the window
		{At: now.Add(-12 * time.Hour), Queue: "a", Priority: 1, GPUHours: 24},
		{At: now.Add(-time.Hour), Queue: "a", Priority: 1, GPUHours: 24},
		{At: now.Add(-time.Hour), Queue: "a", Priority: 2, GPUHours: 12},
		{At: now.Add(-time.Hour), Queue: "b", Priority: 1, GPUHours: 6},
		{At: now.Add(time.Hour), Queue: "a", Priority: 2, GPUHours: 1000}, // in the future
		{At: now.Add(-time.Hour), Queue: "a", Priority: 3, GPUHours: math.NaN()},
		{At: now.Add(-2 * time.Hour), Queue: "b", Priority: 1, Flavor: "h100", Size: 8, GPUHours: 12},
		{At: now.Add(-time.Minute / 2), Queue: "b", Priority: 1, Flavor: "h100", Size: 2, GPUHours: 3},
	}
	got := LearnArrivals(samples, now, 24*time.Hour)
	// The first sample in the window is 12h ago: 48 GPU-hours in 12h.
	// Each rate's Over is since its own first sample (at least a
	// minute); flavors and sizes are rates of their own.
	want := []ArrivalRate{
		{Queue: "a", Priority: 1, GPUs: 4, Over: 12 * time.Hour},
		{Queue: "a", Priority: 2, GPUs: 1, Over: time.Hour},
		{Queue: "b", Priority: 1, GPUs: 0.5, Over: time.Hour},
		{Queue: "b", Priority: 1, Flavor: "h100", Size: 2, GPUs: 0.25, Over: time.Minute},
		{Queue: "b", Priority: 1, Flavor: "h100", Size: 8, GPUs: 1, Over: 2 * time.Hour},
	}
	if len(got) != len(want) {
		t.Fatalf("LearnArrivals = %v; want %v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Queue != w.Queue || g.Priority != w.Priority || g.Flavor != w.Flavor || g.Size != w.Size || g.Over != w.Over || !near2(g.GPUs, w.GPUs, 1e-9) {
			t.Errorf("LearnArrivals[%d] = %+v; want %+v", i, g, w)
		}
	}
	if LearnArrivals(nil, now, time.Hour) != nil || LearnArrivals(samples, now, 0) != nil {
		t.Error("no samples or no window: want nil")
	}
	// A burst: at least a minute.
	burst := LearnArrivals([]ArrivalSample{{At: now, Priority: 0, GPUHours: 1}}, now, time.Hour)
	if len(burst) != 1 || !near2(burst[0].GPUs, 60, 1e-9) {
		t.Errorf("burst: %v; want 60 GPU-hours per hour", burst)
	}
}

// TestRangeAfter: a run that has gone on longer than most is expected
// to end among the longer runs, never before now.
func TestRangeAfter(t *testing.T) {
	var samples []RuntimeSample
	for i := range 100 { // 0.01 … 1.00
		samples = append(samples, RuntimeSample{Team: "a", Requested: 100 * time.Minute, Actual: time.Duration(i+1) * time.Minute})
	}
	m := LearnRuntimes(samples, LearnOptions{Prior: 0.001})
	if r := m.RangeAfter("a", "", 0); r != m.Range("a", "") {
		t.Errorf("not started: %+v; want Range %+v", r, m.Range("a", ""))
	}
	// Past half: among the runs of 0.51 … 1: the 10th and 90th
	// percentiles of those.
	if r := m.RangeAfter("a", "", 0.5); !near2(r.Low, 0.55, 0.011) || !near2(r.High, 0.95, 0.011) {
		t.Errorf("after half: %+v; want about 0.55 … 0.95", r)
	}
	// Longer than every run seen (impossible here but for the cap):
	// the rest divided as the whole.
	long := LearnRuntimes([]RuntimeSample{{Team: "a", Requested: time.Hour, Actual: 6 * time.Minute}}, LearnOptions{})
	if r := long.RangeAfter("a", "", 0.5); r.Low < 0.5 || r.High > 1 || r.High <= r.Low {
		t.Errorf("past every run: %+v; want within 0.5 … 1", r)
	}
	// Nothing learned: DefaultRange while it fits, else the rest.
	var none *RuntimeModel
	if r := none.RangeAfter("a", "", 0.2); r != DefaultRange {
		t.Errorf("nothing learned, early: %+v", r)
	}
	if r := none.RangeAfter("a", "", 0.8); !near2(r.Low, 0.8, 1e-9) || !near2(r.High, 1, 1e-9) {
		t.Errorf("nothing learned, late: %+v; want 0.8 … 1", r)
	}
}
