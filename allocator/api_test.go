package allocator

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFlavorForPreemption(t *testing.T) {
	cluster := func(within string) *Cluster {
		return MakeCluster().Flavor("h100", 8).Flavor("a100", 8).
			Nodes("h100", 1, 8, 0, 0).Nodes("a100", 1, 8, 0, 0).
			Queue(MakeQueue("a").Quota("h100", 8).Quota("a100", 8).Preempt(within, "")).Obj()
	}
	cases := map[string]struct {
		workloads []Workload
		want      []string
		wantOn    string
	}{
		"first flavor where preemption works": {
			workloads: []Workload{
				MakeWorkload("h").Queue("a").GPUs(8).Admitted("h100", 0, "h100-00").Obj(),
				MakeWorkload("a").Queue("a").GPUs(8).Admitted("a100", 0, "a100-00").Obj(),
				MakeWorkload("x").Queue("a").GPUs(8).Priority(5).Obj(),
			},
			want:   []string{"preempted:h<x", "admitted:x"},
			wantOn: "h100",
		},
		"next flavor when the first has no victims": {
			workloads: []Workload{
				MakeWorkload("h").Queue("a").GPUs(8).Priority(9).Admitted("h100", 0, "h100-00").Obj(),
				MakeWorkload("a").Queue("a").GPUs(8).Admitted("a100", 0, "a100-00").Obj(),
				MakeWorkload("x").Queue("a").GPUs(8).Priority(5).Obj(),
			},
			want:   []string{"preempted:a<x", "admitted:x"},
			wantOn: "a100",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newSnapshot(t, cluster(PreemptLowerPriority), tc.workloads...)
			if diff := cmp.Diff(tc.want, evs(s.Schedule())); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if got := admittedOn(s)["x"]; got != tc.wantOn {
				t.Errorf("x on %q, want %q", got, tc.wantOn)
			}
		})
	}
}

func TestProposeVictims(t *testing.T) {
	c := MakeCluster().Flavor("f", 8).Nodes("f", 2, 8, 0, 0).
		Queue(MakeQueue("a").Cohort("c").Quota("f", 8).BorrowingLimit("f", 4)).
		Queue(MakeQueue("b").Cohort("c").Quota("f", 8)).Obj()
	s := newSnapshot(t, c,
		MakeWorkload("b-high").Queue("b").GPUs(8).Priority(50).Admitted("f", 0, "f-00").Obj(),
		MakeWorkload("b-low").Queue("b").GPUs(4).Priority(1).Admitted("f", 2*time.Hour, "f-01").Obj(),
		MakeWorkload("a-low").Queue("a").GPUs(4).Priority(1).Admitted("f", time.Hour, "f-01").Obj(),
	)
	before := viewOf(s)
	cases := map[string]struct {
		w       Workload
		victims []string
		nodes   []string
		ok      bool
	}{
		"most recently admitted lower-priority first, any queue": {
			w:       MakeWorkload("x").Queue("a").GPUs(4).Priority(10).Obj(),
			victims: []string{"b-low"}, nodes: []string{"f-01"}, ok: true,
		},
		"as many as needed": {
			w:       MakeWorkload("x").Queue("a").GPUs(8).Priority(10).Obj(),
			victims: []string{"b-low", "a-low"}, nodes: []string{"f-01"}, ok: true,
		},
		"never higher or equal priority": {
			w: MakeWorkload("x").Queue("a").GPUs(16).Priority(10).Obj(),
		},
		"own quota still applies": {
			w: MakeWorkload("x").Queue("a").GPUs(16).Priority(99).Obj(),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			victims, a, ok := s.ProposeVictims(tc.w)
			if ok != tc.ok || !cmp.Equal(victims, tc.victims) {
				t.Fatalf("ProposeVictims = %v, %v; want %v, %v", victims, ok, tc.victims, tc.ok)
			}
			if tc.nodes != nil && !cmp.Equal(a.Nodes, tc.nodes) {
				t.Errorf("nodes %v, want %v", a.Nodes, tc.nodes)
			}
		})
	}
	if diff := cmp.Diff(before, viewOf(s)); diff != "" {
		t.Errorf("ProposeVictims changed the snapshot:\n%s", diff)
	}
	undo, _ := s.Release("b-low")
	defer undo()
	if victims, a, ok := s.ProposeVictims(MakeWorkload("x").Queue("a").GPUs(4).Priority(10).Obj()); !ok || len(victims) != 0 || a.Flavor != "f" {
		t.Errorf("a workload that fits already: %v %+v %v", victims, a, ok)
	}
}

func TestMutationErrors(t *testing.T) {
	c := MakeCluster().Flavor("f", 8).Nodes("f", 2, 8, 2, 1).Queue(MakeQueue("a").Quota("f", 8)).Obj()
	s := newSnapshot(t, c,
		MakeWorkload("run").Queue("a").GPUs(4).Admitted("f", 0, "f-00").Obj(),
		MakeWorkload("wait").Queue("a").GPUs(8).Obj(),
		MakeWorkload("pair").Queue("a").GPUs(4).Topology(LevelHost).Obj(),
	)
	before := viewOf(s)
	try := func(_ func(), err error) error { return err }
	cases := map[string]struct {
		err  error
		want error
	}{
		"release unknown":          {err: try(s.Release("nope")), want: ErrNotFound},
		"evict pending":            {err: try(s.Evict("wait")), want: ErrState},
		"extend negative":          {err: try(s.Extend("run", -time.Hour)), want: ErrInvalid},
		"add duplicate":            {err: try(s.Add(MakeWorkload("run").Queue("a").Obj())), want: ErrInvalid},
		"reserve admitted":         {err: try(s.Reserve("run", Admission{Flavor: "f", Nodes: []string{"f-01"}})), want: ErrState},
		"reserve over quota":       {err: try(s.Reserve("wait", Admission{Flavor: "f", Nodes: []string{"f-01"}})), want: ErrState},
		"reserve over capacity":    {err: try(s.Reserve("pair", Admission{Flavor: "f", Nodes: []string{"f-00"}})), want: nil},
		"reserve wrong pod count":  {err: try(s.Reserve("wait", Admission{Flavor: "f", Nodes: []string{"f-00", "f-01"}})), want: ErrInvalid},
		"reserve unknown flavor":   {err: try(s.Reserve("wait", Admission{Flavor: "x", Nodes: []string{"f-00"}})), want: ErrInvalid},
		"preempt with a pending":   {err: func() error { _, err := s.Preempt("wait", []string{"pair"}); return err }(), want: ErrState},
		"preempt the preemptor":    {err: func() error { _, err := s.Preempt("wait", []string{"wait"}); return err }(), want: ErrInvalid},
		"preempt unknown workload": {err: func() error { _, err := s.Preempt("nope", nil); return err }(), want: ErrNotFound},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.want == nil {
				return // a success that changed s; checked below
			}
			if !errors.Is(tc.err, tc.want) {
				t.Errorf("err = %v, want %v", tc.err, tc.want)
			}
		})
	}
	// Only the successful Reserve changed anything.
	after := viewOf(s)
	if diff := cmp.Diff(before.Pending, after.Pending); diff == "" {
		t.Error("the one valid Reserve did not admit")
	}
}

func TestAdvanceWithEndFunction(t *testing.T) {
	c := MakeCluster().Flavor("f", 8).Nodes("f", 1, 8, 0, 0).Queue(MakeQueue("a").Quota("f", 8)).
		Fair(time.Hour, 0).Obj()
	s := newSnapshot(t, c,
		MakeWorkload("run").Queue("a").GPUs(8).Duration(10*time.Hour).Admitted("f", 0, "f-00").Obj(),
		MakeWorkload("next").Queue("a").GPUs(8).Obj(),
	)
	// The caller knows better: run ends after 30 minutes, next never.
	end := func(w Workload) time.Time {
		if w.ID == "run" {
			return w.Admission.At.Add(30 * time.Minute)
		}
		return time.Time{}
	}
	got := evs(s.Advance(t0.Add(time.Hour), end))
	if diff := cmp.Diff([]string{"finished:run", "admitted:next"}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// 8 GPUs for an hour with a one-hour half-life: 8/ln 2 · ½.
	want := DecayUsage(0, 8, time.Hour, time.Hour)
	if u := s.Usage()["a"]; u < want-1e-9 || u > want+1e-9 {
		t.Errorf("usage %v, want %v", u, want)
	}
}

func TestEstimatesQueueJumping(t *testing.T) {
	c := MakeCluster().Flavor("f", 8).Nodes("f", 1, 8, 0, 0).Queue(MakeQueue("a").Quota("f", 8)).Obj()
	s := newSnapshot(t, c,
		MakeWorkload("run").Queue("a").GPUs(8).Duration(2*time.Hour).Admitted("f", 0, "f-00").Obj(),
		MakeWorkload("early").Queue("a").GPUs(8).Duration(time.Hour).Obj(),
		MakeWorkload("urgent").Queue("a").GPUs(8).Duration(time.Hour).Priority(10).Created(time.Hour).Obj(),
		MakeWorkload("never").Queue("a").GPUs(16).Obj(),
	)
	got := Estimates(s, EstimateOptions{Horizon: 24 * time.Hour})
	want := map[string]Estimate{
		"urgent": {ID: "urgent", Known: true, Earliest: t0.Add(time.Hour), Latest: t0.Add(2 * time.Hour),
			Position: 1, Reason: ReasonQuota},
		"early": {ID: "early", Known: true, Earliest: t0.Add(90 * time.Minute), Latest: t0.Add(3 * time.Hour),
			Position: 2, Ahead: 1, AheadHigherPriority: 1, Reason: ReasonPriority},
		"never": {ID: "never", Position: 3, Ahead: 2, AheadHigherPriority: 1, Reason: ReasonPriority},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Estimates (-want +got):\n%s", diff)
	}
	if e := EstimateFor(s, "run", EstimateOptions{}); e != (Estimate{ID: "run"}) {
		t.Errorf("EstimateFor(admitted) = %+v", e)
	}
}
