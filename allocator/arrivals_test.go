package allocator

import (
	"testing"
	"time"
)

// TestArrivalDelay: a steady load stretches a wait by 1/(1−ρ) (capped at
// MaxArrivalShare), a load that has been arriving for B delays it by no
// more than ρ·B, and a load above the GPUs is a burst waited out (B).
func TestArrivalDelay(t *testing.T) {
	w := 2 * time.Hour
	capped := time.Duration(MaxArrivalShare / (1 - MaxArrivalShare) * float64(w))
	for name, tc := range map[string]struct {
		a    arrivalLoad
		w    time.Duration
		want time.Duration
	}{
		"none":                   {arrivalLoad{}, w, 0},
		"steady half":            {arrivalLoad{rho: 0.5}, w, 2 * time.Hour},
		"steady near 1, capped":  {arrivalLoad{rho: 0.95}, w, capped},
		"over 1, for ever":       {arrivalLoad{rho: 3, held: 3}, w, capped},
		"half, for half an hour": {arrivalLoad{rho: 0.5, over: 30 * time.Minute}, w, 15 * time.Minute},
		"half, for a day":        {arrivalLoad{rho: 0.5, over: 24 * time.Hour}, w, 2 * time.Hour},
		"burst of 90s":           {arrivalLoad{rho: 3, held: 3, over: 90 * time.Second, heldOver: 90 * time.Second}, time.Second, 90 * time.Second},
		"burst of exactly all":   {arrivalLoad{rho: 1, held: 1, over: time.Hour, heldOver: time.Hour}, time.Second, time.Hour},
		// Smaller work backfilling gaps: a burst of it only stretches.
		"burst of smaller work": {arrivalLoad{rho: 3, over: 90 * time.Second}, time.Second,
			capped / 7200},
		"no wait": {arrivalLoad{rho: 3, held: 3, over: time.Hour, heldOver: time.Hour}, 0, 0},
	} {
		if got := arrivalDelay(tc.w, tc.a); absDuration(got-tc.want) > time.Millisecond {
			t.Errorf("%s: arrivalDelay(%v, %+v) = %v; want %v", name, tc.w, tc.a, got, tc.want)
		}
	}
}

// TestArrivalsFlavorSizeAndBurst: what arrives goes first if it has a
// higher priority or (backfilling) asks for fewer GPUs than the waiting
// workload; it counts on the flavor it asks for (any flavor: its share
// of the cluster), not on another; under first come, first served only
// the smaller goes first; a burst above the GPUs is waited out.
func TestArrivalsFlavorSizeAndBurst(t *testing.T) {
	build := func(mode Mode) *Snapshot {
		c := MakeCluster().Flavor("h100", 8).Flavor("a100", 8).Node("n1", "h100", 8, "", "").Node("n2", "a100", 8, "", "").
			Queue(MakeQueue("a").Quota("h100", 8).Quota("a100", 8)).Obj()
		c.Policy.Mode = mode
		ws := []Workload{
			MakeWorkload("run").Queue("a").GPUs(8).Duration(2*time.Hour).Admitted("h100", 0, "n1").Obj(),
			MakeWorkload("run2").Queue("a").GPUs(8).Duration(2*time.Hour).Admitted("a100", 0, "n2").Obj(),
			MakeWorkload("p").Queue("a").GPUs(8).Flavor("h100").Priority(1).Duration(time.Hour).Obj(),
		}
		s, err := NewSnapshot(c, t0, ws, nil)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	base := EstimateOptions{Factors: map[string]Range{"a": {Low: 1, High: 1}}}
	higher := func(flavor string, size int, gpus float64, over time.Duration) []ArrivalRate {
		return []ArrivalRate{{Queue: "a", Priority: 2, Flavor: flavor, Size: size, GPUs: gpus, Over: over}}
	}
	lower := func(size int) []ArrivalRate {
		return []ArrivalRate{{Queue: "a", Priority: 0, Flavor: "h100", Size: size, GPUs: 4}}
	}
	capped := time.Duration(float64(2*time.Hour) / (1 - MaxArrivalShare))
	for name, tc := range map[string]struct {
		mode     Mode
		arrivals []ArrivalRate
		latest   time.Duration
	}{
		"none":                           {"", nil, 2 * time.Hour},
		"higher, other flavor":           {"", higher("a100", 8, 4, 0), 2 * time.Hour},
		"higher, its flavor":             {"", higher("h100", 8, 4, 0), 4 * time.Hour},
		"higher, any flavor":             {"", higher("", 8, 8, 0), 4 * time.Hour},
		"lower, smaller":                 {"", lower(2), 4 * time.Hour},
		"lower, as large":                {"", lower(8), 2 * time.Hour},
		"lower, size unknown":            {"", lower(0), 2 * time.Hour},
		"higher, for half an hour":       {"", higher("h100", 8, 4, 30*time.Minute), 2*time.Hour + 15*time.Minute},
		"burst above the GPUs, 90m":      {"", higher("h100", 8, 100, 90*time.Minute), 3*time.Hour + 30*time.Minute},
		"burst above the GPUs, for ever": {"", higher("h100", 8, 100, 0), capped},
		"burst above the GPUs, a day":    {"", higher("h100", 8, 100, 24*time.Hour), 26 * time.Hour},
		"smaller work above the GPUs, a day": {"", []ArrivalRate{{Queue: "a", Priority: 0, Flavor: "h100", Size: 2, GPUs: 100, Over: 24 * time.Hour}},
			capped},
		"fcfs, higher as large": {FirstComeFirstServed, higher("h100", 8, 4, 0), 2 * time.Hour},
		"fcfs, higher smaller":  {FirstComeFirstServed, higher("h100", 2, 4, 0), 4 * time.Hour},
		"fcfs, lower smaller":   {FirstComeFirstServed, lower(2), 4 * time.Hour},
	} {
		s := build(tc.mode)
		o := base
		o.Arrivals = tc.arrivals
		got := EstimateFor(s, "p", o)
		if !got.Known || got.Earliest != t0.Add(2*time.Hour) || absDuration(got.Latest.Sub(t0.Add(tc.latest))) > time.Millisecond {
			t.Errorf("%s: %v … %v; want +2h … +%v", name, got.Earliest.Sub(t0), got.Latest.Sub(t0), tc.latest)
		}
		if all := Estimates(s, o)["p"]; all.Latest != got.Latest {
			t.Errorf("%s: Estimates' latest %v, EstimateFor's %v", name, all.Latest.Sub(t0), got.Latest.Sub(t0))
		}
	}
	// The Estimator tells arrivals apart that differ only in their
	// flavor, size or how long they have been arriving.
	s := build("")
	e := NewEstimator()
	for i, arr := range [][]ArrivalRate{higher("h100", 8, 4, 0), higher("h100", 8, 4, time.Minute),
		higher("a100", 8, 4, time.Minute), lower(8), lower(2)} {
		o := base
		o.Arrivals = arr
		if got, want := e.Estimates(s, o)["p"].Latest, EstimateFor(s, "p", o).Latest; got != want {
			t.Errorf("Estimator, arrivals %d: %v; want %v", i, got.Sub(t0), want.Sub(t0))
		}
	}
}

// TestArrivalsFairShareBurst: in FairSharing mode, a burst of work of
// the same priority from a queue with a lower share goes first by
// order, and is waited out as a burst of higher-priority work is.
func TestArrivalsFairShareBurst(t *testing.T) {
	c := MakeCluster().Fair(24*time.Hour, 0).Flavor("h100", 8).Node("n1", "h100", 8, "", "").
		Queue(MakeQueue("a").Cohort("c").Quota("h100", 4)).Queue(MakeQueue("b").Cohort("c").Quota("h100", 4)).Obj()
	ws := []Workload{
		MakeWorkload("run").Queue("a").GPUs(8).Duration(2*time.Hour).Admitted("h100", 0, "n1").Obj(),
		MakeWorkload("p").Queue("a").GPUs(8).Duration(time.Hour).Obj(),
	}
	s, err := NewSnapshot(c, t0, ws, map[string]float64{"a": 10, "b": 1})
	if err != nil {
		t.Fatal(err)
	}
	o := EstimateOptions{Factors: map[string]Range{"a": {Low: 1, High: 1}}}
	o.Arrivals = []ArrivalRate{{Queue: "b", Priority: 0, Size: 8, GPUs: 100, Over: 24 * time.Hour}}
	if got, want := EstimateFor(s, "p", o).Latest, t0.Add(26*time.Hour); got != want {
		t.Errorf("fair-share burst: latest +%v; want +%v (waited out)", got.Sub(t0), want.Sub(t0))
	}
}
