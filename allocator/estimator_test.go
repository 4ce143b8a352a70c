package allocator

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestPropertyEstimator holds the Estimator to a from-scratch computation
// through a random history of changes, on the snapshot it was given and
// on fresh snapshots of the same state (as the command service builds
// them), and checks that it recomputes only when something changed.
func TestPropertyEstimator(t *testing.T) {
	for seed := range uint64(propertyCases / 6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 12))
			s, _ := randomStateKind(t, r, seed%2 == 1)
			opts := EstimateOptions{Horizon: 72 * time.Hour, Factors: map[string]Range{"q0": {Low: 0.2, High: 1.5}},
				Arrivals: []ArrivalRate{{Queue: "q1", Priority: 2, GPUs: float64(r.IntN(8))}, {Queue: "q0", Priority: 1, GPUs: float64(r.IntN(8))}}}
			est := NewEstimator()
			n := 0
			for step := range 12 {
				what := "nothing"
				switch r.IntN(6) {
				case 0:
					what = "add"
					s.Add(randomWorkload(r, s.Cluster(), fmt.Sprintf("n%02d", n)))
					n++
				case 1:
					what = "schedule"
					s.Schedule()
				case 2:
					what = "advance"
					s.Advance(s.Now().Add(time.Duration(1+r.IntN(120))*time.Minute), nil)
				case 3:
					what = "options"
					opts.Workloads = map[string]Range{fmt.Sprintf("p%02d", r.IntN(10)): {Low: 0.1, High: 0.3}}
				}
				fresh, err := NewSnapshot(s.Cluster(), s.Now(), s.Workloads(), s.Usage())
				if err != nil {
					t.Fatal(err)
				}
				want := Estimates(s, opts)
				before := est.Recomputed
				if got := est.Estimates(s, opts); !cmp.Equal(got, want) {
					t.Fatalf("step %d (%s): Estimator differs from Estimates:\n%s", step, what, cmp.Diff(want, got))
				}
				if got := est.Estimates(fresh, opts); !cmp.Equal(got, want) {
					t.Fatalf("step %d (%s): on a fresh snapshot:\n%s", step, what, cmp.Diff(want, got))
				}
				if est.Recomputed > before+1 {
					t.Errorf("step %d (%s): recomputed %d times for one state", step, what, est.Recomputed-before)
				}
				for _, id := range fresh.Order() {
					if got, want := est.For(fresh, id, opts), EstimateFor(s, id, opts); !cmp.Equal(got, want) {
						t.Errorf("step %d: For(%s) = %+v; EstimateFor %+v", step, id, got, want)
					}
				}
				if est.For(fresh, "nobody", opts) != (Estimate{ID: "nobody"}) {
					t.Errorf("For(unknown) is not empty")
				}
			}
		})
	}
}

// TestEstimatorNoticesChanges: every kind of change gives another key;
// the same state, built in another order, the same.
func TestEstimatorNoticesChanges(t *testing.T) {
	c := MakeCluster().Flavor("h100", 8).Node("n1", "h100", 8, "", "").Node("n2", "h100", 8, "", "").
		Queue(MakeQueue("a").Quota("h100", 16)).Obj()
	ws := []Workload{
		MakeWorkload("run").Queue("a").GPUs(8).Duration(2*time.Hour).Admitted("h100", -time.Hour, "n1").Obj(),
		MakeWorkload("p1").Queue("a").GPUs(8).Duration(time.Hour).Created(time.Minute).Obj(),
		MakeWorkload("p2").Queue("a").GPUs(8).Duration(time.Hour).Created(2 * time.Minute).Obj(),
	}
	base, err := NewSnapshot(c, t0, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := NewEstimator()
	opts := EstimateOptions{}
	key := e.fingerprint(base, opts)
	reversed, _ := NewSnapshot(c, t0, []Workload{ws[2], ws[1], ws[0]}, nil)
	if e.fingerprint(reversed, opts) != key {
		t.Error("the same state in another order has another key")
	}
	change := map[string]func() (*Snapshot, EstimateOptions){
		"time": func() (*Snapshot, EstimateOptions) {
			s, _ := NewSnapshot(c, t0.Add(time.Second), ws, nil)
			return s, opts
		},
		"usage": func() (*Snapshot, EstimateOptions) {
			s, _ := NewSnapshot(c, t0, ws, map[string]float64{"a": 1})
			return s, opts
		},
		"duration": func() (*Snapshot, EstimateOptions) {
			w := append([]Workload(nil), ws...)
			w[1].Duration = 2 * time.Hour
			s, _ := NewSnapshot(c, t0, w, nil)
			return s, opts
		},
		"admission": func() (*Snapshot, EstimateOptions) {
			w := append([]Workload(nil), ws...)
			w[0] = MakeWorkload("run").Queue("a").GPUs(8).Duration(2*time.Hour).Admitted("h100", -time.Hour, "n2").Obj()
			s, _ := NewSnapshot(c, t0, w, nil)
			return s, opts
		},
		"new request": func() (*Snapshot, EstimateOptions) {
			s, _ := NewSnapshot(c, t0, append(append([]Workload(nil), ws...), MakeWorkload("p3").Queue("a").GPUs(1).Obj()), nil)
			return s, opts
		},
		"quota": func() (*Snapshot, EstimateOptions) {
			c2 := MakeCluster().Flavor("h100", 8).Node("n1", "h100", 8, "", "").Node("n2", "h100", 8, "", "").
				Queue(MakeQueue("a").Quota("h100", 8)).Obj()
			s, _ := NewSnapshot(c2, t0, ws, nil)
			return s, opts
		},
		"factors": func() (*Snapshot, EstimateOptions) {
			return base, EstimateOptions{Factors: map[string]Range{"a": {1, 1}}}
		},
		"workload ranges": func() (*Snapshot, EstimateOptions) {
			return base, EstimateOptions{Workloads: map[string]Range{"run": {1, 1}}}
		},
		"arrivals": func() (*Snapshot, EstimateOptions) {
			return base, EstimateOptions{Arrivals: []ArrivalRate{{Queue: "a", Priority: 1, GPUs: 2}}}
		},
		"step": func() (*Snapshot, EstimateOptions) { return base, EstimateOptions{Step: -1} },
	}
	for name, f := range change {
		s, o := f()
		if e.fingerprint(s, o) == key {
			t.Errorf("%s: same key", name)
		}
	}
}

// TestRoundEnd: the grid keeps the step near Now and round figures
// further ahead, and is never early.
func TestRoundEnd(t *testing.T) {
	now := t0
	for _, tc := range []struct {
		in, want, step time.Duration
	}{
		{-time.Hour, -time.Hour, time.Minute},
		{0, 0, time.Minute},
		{time.Second, time.Minute, time.Minute},
		{31*time.Minute + time.Second, 32 * time.Minute, time.Minute},
		{63 * time.Minute, 63 * time.Minute, time.Minute},
		{65 * time.Minute, 66 * time.Minute, time.Minute},              // u = 2m
		{3*time.Hour + 30*time.Minute, 210 * time.Minute, time.Minute}, // u = 5m
		{3*time.Hour + 31*time.Minute, 215 * time.Minute, time.Minute},
		{20 * time.Hour, 20 * time.Hour, time.Minute}, // u = 30m
		{20*time.Hour + time.Minute, 20*time.Hour + 30*time.Minute, time.Minute},
		{90 * time.Hour, 90 * time.Hour, time.Minute}, // u = 2h
		{90*time.Hour + time.Second, 92 * time.Hour, time.Minute},
		{7 * time.Second, 7 * time.Second, 0},
		{7 * time.Second, 10 * time.Second, 5 * time.Second},
	} {
		got := roundEnd(now, now.Add(tc.in), tc.step).Sub(now)
		if got != tc.want {
			t.Errorf("roundEnd(+%v, step %v) = +%v; want +%v", tc.in, tc.step, got, tc.want)
		}
	}
	// Never early, and within 1/relResolution (or a step) of the end.
	r := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		d := time.Duration(r.Int64N(int64(400 * time.Hour)))
		got := roundEnd(now, now.Add(d), time.Minute).Sub(now)
		if got < d || got-d >= max(time.Minute, d/relResolution) {
			t.Fatalf("roundEnd(+%v) = +%v", d, got)
		}
	}
}

// TestRoundEndDown: the low simulation's grid is roundEnd's, rounded
// down: never late, within a grid unit, never at Now.
func TestRoundEndDown(t *testing.T) {
	now := t0
	for _, tc := range []struct {
		in, want, step time.Duration
	}{
		{-time.Hour, -time.Hour, time.Minute},
		{0, 0, time.Minute},
		{time.Second, time.Minute, time.Minute}, // within the first step: up to it
		{31*time.Minute + time.Second, 31 * time.Minute, time.Minute},
		{65 * time.Minute, 64 * time.Minute, time.Minute}, // u = 2m
		{3*time.Hour + 34*time.Minute, 210 * time.Minute, time.Minute},
		{800 * time.Second, 795 * time.Second, time.Second}, // u = 15s
		{7 * time.Second, 7 * time.Second, 0},
		{7 * time.Second, 5 * time.Second, 5 * time.Second},
	} {
		got := roundEndDown(now, now.Add(tc.in), tc.step).Sub(now)
		if got != tc.want {
			t.Errorf("roundEndDown(+%v, step %v) = +%v; want +%v", tc.in, tc.step, got, tc.want)
		}
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 10000 {
		d := time.Minute + time.Duration(r.Int64N(int64(400*time.Hour)))
		down := roundEndDown(now, now.Add(d), time.Minute).Sub(now)
		up := roundEnd(now, now.Add(d), time.Minute).Sub(now)
		if down > d || d-down >= max(time.Minute, d/relResolution) || down <= 0 {
			t.Fatalf("roundEndDown(+%v) = +%v", d, down)
		}
		if up != down && up-down != gridUnit(d, time.Minute) {
			t.Fatalf("+%v: down +%v and up +%v are not neighbours on one grid", d, down, up)
		}
	}
}

// TestEstimateRangeHoldsTheEnd: a workload waiting on one end at a time
// off the grid gets a range that holds it (the low simulation rounds
// that end down, the high one up), a grid unit either side at most.
func TestEstimateRangeHoldsTheEnd(t *testing.T) {
	c := MakeCluster().Flavor("h100", 8).Node("n1", "h100", 8, "", "").
		Queue(MakeQueue("a").Quota("h100", 8)).Obj()
	ws := []Workload{
		MakeWorkload("run").Queue("a").GPUs(8).Duration(800*time.Second).Admitted("h100", 0, "n1").Obj(),
		MakeWorkload("p").Queue("a").GPUs(8).Duration(time.Hour).Obj(),
	}
	s := newSnapshot(t, c, ws...)
	opts := EstimateOptions{Factors: map[string]Range{"a": {Low: 1, High: 1}}}
	end := t0.Add(800 * time.Second)
	for name, e := range map[string]Estimate{"EstimateFor": EstimateFor(s, "p", opts), "Estimates": Estimates(s, opts)["p"]} {
		if e.Earliest.After(end) || e.Latest.Before(end) || end.Sub(e.Earliest) >= 15*time.Second || e.Latest.Sub(end) >= 15*time.Second {
			t.Errorf("%s: %v … %v; want a range holding the end at +800s", name, e.Earliest.Sub(t0), e.Latest.Sub(t0))
		}
	}
}

// TestArrivalsStretchLatest: higher-priority work arriving at half the
// flavor's GPUs doubles the latest wait; lower or equal priorities, and
// first-come-first-served, change nothing.
func TestArrivalsStretchLatest(t *testing.T) {
	c := MakeCluster().Flavor("h100", 8).Node("n1", "h100", 8, "", "").
		Queue(MakeQueue("a").Quota("h100", 8)).Obj()
	ws := []Workload{
		MakeWorkload("run").Queue("a").GPUs(8).Duration(2*time.Hour).Admitted("h100", 0, "n1").Obj(),
		MakeWorkload("p").Queue("a").GPUs(8).Priority(1).Duration(time.Hour).Obj(),
	}
	s, err := NewSnapshot(c, t0, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := EstimateOptions{Factors: map[string]Range{"a": {Low: 0.5, High: 1}}}
	e := EstimateFor(s, "p", base)
	if !e.Known || e.Earliest != t0.Add(time.Hour) || e.Latest != t0.Add(2*time.Hour) {
		t.Fatalf("without arrivals: %+v", e)
	}
	for name, tc := range map[string]struct {
		arrivals []ArrivalRate
		latest   time.Duration
	}{
		"higher":         {[]ArrivalRate{{Queue: "a", Priority: 2, GPUs: 4}}, 4 * time.Hour},
		"higher, capped": {[]ArrivalRate{{Queue: "a", Priority: 2, GPUs: 100}}, time.Duration(float64(2*time.Hour) * (1 / (1 - MaxArrivalShare)))},
		"same and lower": {[]ArrivalRate{{Queue: "a", Priority: 1, GPUs: 4}, {Queue: "a", Priority: 0, GPUs: 4}}, 2 * time.Hour},
		"not a number":   {[]ArrivalRate{{Queue: "a", Priority: 2, GPUs: math.NaN()}}, 2 * time.Hour},
	} {
		o := base
		o.Arrivals = tc.arrivals
		got := EstimateFor(s, "p", o)
		if got.Earliest != e.Earliest || absDuration(got.Latest.Sub(t0.Add(tc.latest))) > time.Millisecond {
			t.Errorf("%s: %v … %v; want %v … +%v", name, got.Earliest, got.Latest, e.Earliest, tc.latest)
		}
		if all := Estimates(s, o)["p"]; !cmp.Equal(all, got) {
			t.Errorf("%s: Estimates %+v, EstimateFor %+v", name, all, got)
		}
	}
}

// TestWorkloadRanges: a workload's own range wins over its queue's.
func TestWorkloadRanges(t *testing.T) {
	c := MakeCluster().Flavor("h100", 8).Node("n1", "h100", 8, "", "").
		Queue(MakeQueue("a").Quota("h100", 8)).Obj()
	ws := []Workload{
		MakeWorkload("run").Queue("a").GPUs(8).Duration(4*time.Hour).Admitted("h100", 0, "n1").Obj(),
		MakeWorkload("p").Queue("a").GPUs(8).Duration(time.Hour).Obj(),
	}
	s, err := NewSnapshot(c, t0, ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := EstimateFor(s, "p", EstimateOptions{Factors: map[string]Range{"a": {Low: 1, High: 1}},
		Workloads: map[string]Range{"run": {Low: 0.25, High: 0.5}}})
	if e.Earliest != t0.Add(time.Hour) || e.Latest != t0.Add(2*time.Hour) {
		t.Errorf("%v … %v; want +1h … +2h from run's own range", e.Earliest, e.Latest)
	}
}

// TestArrivalsFairSharing: in FairSharing mode, arrivals of the same
// priority from a queue with a lower share go first; from one with a
// higher share, or from the workload's own queue, they do not.
func TestArrivalsFairSharing(t *testing.T) {
	c := MakeCluster().Fair(24*time.Hour, 0).Flavor("h100", 8).Node("n1", "h100", 8, "", "").
		Queue(MakeQueue("a").Cohort("c").Quota("h100", 4)).Queue(MakeQueue("b").Cohort("c").Quota("h100", 4)).
		Queue(MakeQueue("z").Cohort("c").Quota("h100", 0)).Obj()
	ws := []Workload{
		MakeWorkload("run").Queue("a").GPUs(8).Duration(2*time.Hour).Admitted("h100", 0, "n1").Obj(),
		MakeWorkload("p").Queue("a").GPUs(8).Duration(time.Hour).Obj(),
	}
	s, err := NewSnapshot(c, t0, ws, map[string]float64{"a": 10, "b": 1, "z": 100})
	if err != nil {
		t.Fatal(err)
	}
	base := EstimateOptions{Factors: map[string]Range{"a": {Low: 1, High: 1}}}
	for name, tc := range map[string]struct {
		queue  string
		latest time.Duration
	}{"lower share": {"b", 4 * time.Hour}, "higher share": {"z", 2 * time.Hour}, "own queue": {"a", 2 * time.Hour}} {
		o := base
		o.Arrivals = []ArrivalRate{{Queue: tc.queue, Priority: 0, GPUs: 4}}
		if got := EstimateFor(s, "p", o); got.Latest != t0.Add(tc.latest) {
			t.Errorf("%s: latest %v; want +%v", name, got.Latest, tc.latest)
		}
	}
}

// TestPropertyEstimatorAfterAdmission: when Kueue admits what the
// estimates predicted for Now (Schedule at the same instant), the
// Estimator rebuilds the estimates from its last simulations, and they
// equal a recomputation from scratch; so do For's answers. A state that
// differs in anything is recomputed.
func TestPropertyEstimatorAfterAdmission(t *testing.T) {
	reused := 0
	for seed := range uint64(propertyCases / 3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 13))
			s, _ := randomStateKind(t, r, seed%2 == 1)
			opts := EstimateOptions{Horizon: 72 * time.Hour, Factors: map[string]Range{"q0": {Low: 0.2, High: 1.5}},
				Arrivals: []ArrivalRate{{Queue: "q1", Priority: 2, GPUs: float64(r.IntN(8))}}}
			if seed%3 == 0 {
				opts.Step = -1
			}
			est := NewEstimator()
			for step := range 4 {
				// Pending work that fits now: from time to time a new
				// request, or time passes with ends.
				switch r.IntN(4) {
				case 0:
					s.Add(randomWorkload(r, s.Cluster(), fmt.Sprintf("a%d", step)))
				case 3:
					// Urgent work that preempts in the first step.
					for i := range 1 + r.IntN(3) {
						w := randomWorkload(r, s.Cluster(), fmt.Sprintf("u%d-%d", step, i))
						w.Priority = 3 + int32(r.IntN(2))
						s.Add(w)
					}
				case 1:
					s.Advance(s.Now().Add(time.Duration(1+r.IntN(90))*time.Minute), nil)
				}
				est.Estimates(s, opts)
				after := s.Clone()
				admitted := 0
				for _, ev := range after.Schedule() {
					if ev.Kind == EventAdmitted {
						admitted++
					}
				}
				fresh, err := NewSnapshot(after.Cluster(), after.Now(), after.Workloads(), after.Usage())
				if err != nil {
					t.Fatal(err)
				}
				before := est.Reused
				want := Estimates(fresh, opts)
				if got := est.Estimates(fresh, opts); !cmp.Equal(got, want) {
					t.Fatalf("step %d (%d admitted, reused %v): Estimator differs from Estimates:\n%s",
						step, admitted, est.Reused > before, cmp.Diff(want, got))
				}
				reused += est.Reused - before
				for _, id := range fresh.Order() {
					if got, want := est.For(fresh, id, opts), EstimateFor(fresh, id, opts); !cmp.Equal(got, want) {
						t.Errorf("step %d: For(%s) = %+v; EstimateFor %+v", step, id, got, want)
					}
				}
				s = after
			}
		})
	}
	if reused == 0 {
		t.Error("no state was reused: the test does not test the reuse")
	}
	t.Logf("reused %d times", reused)
}
