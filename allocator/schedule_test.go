package allocator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Scenarios from Kueue's preemption and queueing docs. Each runs one
// Schedule cycle and compares the events.
func TestScheduleKueueSemantics(t *testing.T) {
	oneNode := func(queues ...*queueWrapper) *Cluster {
		c := MakeCluster().Flavor("f", 8).Nodes("f", 1, 8, 0, 0)
		for _, q := range queues {
			c.Queue(q)
		}
		return c.Obj()
	}
	twoNodes := func(queues ...*queueWrapper) *Cluster {
		c := MakeCluster().Flavor("f", 8).Nodes("f", 2, 8, 0, 0)
		for _, q := range queues {
			c.Queue(q)
		}
		return c.Obj()
	}
	cases := map[string]struct {
		cluster   *Cluster
		workloads []Workload
		want      []string
	}{
		"within queue, LowerPriority: preempts lower priority": {
			cluster: oneNode(MakeQueue("a").Quota("f", 8).Preempt(PreemptLowerPriority, "")),
			workloads: []Workload{
				MakeWorkload("low").Queue("a").GPUs(8).Admitted("f", 0, "f-00").Obj(),
				MakeWorkload("high").Queue("a").GPUs(8).Priority(10).Obj(),
			},
			want: []string{"preempted:low<high", "admitted:high"},
		},
		"within queue, Never: waits": {
			cluster: oneNode(MakeQueue("a").Quota("f", 8)),
			workloads: []Workload{
				MakeWorkload("low").Queue("a").GPUs(8).Admitted("f", 0, "f-00").Obj(),
				MakeWorkload("high").Queue("a").GPUs(8).Priority(10).Obj(),
			},
		},
		"within queue, LowerPriority: equal priority is safe even if newer": {
			cluster: oneNode(MakeQueue("a").Quota("f", 8).Preempt(PreemptLowerPriority, "")),
			workloads: []Workload{
				MakeWorkload("newer").Queue("a").GPUs(8).Priority(10).Created(time.Hour).Admitted("f", time.Hour, "f-00").Obj(),
				MakeWorkload("older").Queue("a").GPUs(8).Priority(10).Obj(),
			},
		},
		"within queue, LowerOrNewerEqualPriority: preempts a newer equal": {
			cluster: oneNode(MakeQueue("a").Quota("f", 8).Preempt(PreemptLowerOrNewerEqualPriority, "")),
			workloads: []Workload{
				MakeWorkload("newer").Queue("a").GPUs(8).Priority(10).Created(time.Hour).Admitted("f", time.Hour, "f-00").Obj(),
				MakeWorkload("older").Queue("a").GPUs(8).Priority(10).Obj(),
			},
			want: []string{"preempted:newer<older", "admitted:older"},
		},
		"within queue, LowerOrNewerEqualPriority: not an older equal": {
			cluster: oneNode(MakeQueue("a").Quota("f", 8).Preempt(PreemptLowerOrNewerEqualPriority, "")),
			workloads: []Workload{
				MakeWorkload("older").Queue("a").GPUs(8).Priority(10).Admitted("f", 0, "f-00").Obj(),
				MakeWorkload("newer").Queue("a").GPUs(8).Priority(10).Created(time.Hour).Obj(),
			},
		},
		"minimal set: the fill-back spares an unneeded victim": {
			cluster: oneNode(MakeQueue("a").Quota("f", 8).Preempt(PreemptLowerPriority, "")),
			workloads: []Workload{
				MakeWorkload("l1").Queue("a").GPUs(2).Admitted("f", 1*time.Hour, "f-00").Obj(),
				MakeWorkload("l2").Queue("a").GPUs(4).Admitted("f", 2*time.Hour, "f-00").Obj(),
				MakeWorkload("l3").Queue("a").GPUs(2).Admitted("f", 3*time.Hour, "f-00").Obj(),
				MakeWorkload("h").Queue("a").GPUs(4).Priority(10).Obj(),
			},
			// Candidates in order l3, l2, l1: removing l3 then l2 fits;
			// putting l3 back still fits.
			want: []string{"preempted:l2<h", "admitted:h"},
		},
		"minimal set: lowest priority first": {
			cluster: oneNode(MakeQueue("a").Quota("f", 8).Preempt(PreemptLowerPriority, "")),
			workloads: []Workload{
				MakeWorkload("p1").Queue("a").GPUs(4).Priority(1).Admitted("f", 2*time.Hour, "f-00").Obj(),
				MakeWorkload("p0").Queue("a").GPUs(4).Admitted("f", 1*time.Hour, "f-00").Obj(),
				MakeWorkload("h").Queue("a").GPUs(4).Priority(10).Obj(),
			},
			want: []string{"preempted:p0<h", "admitted:h"},
		},
		"reclaim Any: takes back nominal quota from a borrower": {
			cluster: twoNodes(
				MakeQueue("a").Cohort("ab").Quota("f", 8).Preempt("", PreemptAny),
				MakeQueue("b").Cohort("ab").Quota("f", 8)),
			workloads: []Workload{
				MakeWorkload("b1").Queue("b").GPUs(8).Priority(5).Admitted("f", 1*time.Hour, "f-00").Obj(),
				MakeWorkload("b2").Queue("b").GPUs(8).Priority(5).Admitted("f", 2*time.Hour, "f-01").Obj(),
				MakeWorkload("a1").Queue("a").GPUs(8).Obj(),
			},
			want: []string{"preempted:b2<a1", "admitted:a1"},
		},
		"reclaim LowerPriority: not an equal or higher priority borrower": {
			cluster: twoNodes(
				MakeQueue("a").Cohort("ab").Quota("f", 8).Preempt("", PreemptLowerPriority),
				MakeQueue("b").Cohort("ab").Quota("f", 8)),
			workloads: []Workload{
				MakeWorkload("b1").Queue("b").GPUs(8).Admitted("f", 1*time.Hour, "f-00").Obj(),
				MakeWorkload("b2").Queue("b").GPUs(8).Admitted("f", 2*time.Hour, "f-01").Obj(),
				MakeWorkload("a1").Queue("a").GPUs(8).Obj(),
			},
		},
		"reclaim LowerPriority: a lower priority borrower": {
			cluster: twoNodes(
				MakeQueue("a").Cohort("ab").Quota("f", 8).Preempt("", PreemptLowerPriority),
				MakeQueue("b").Cohort("ab").Quota("f", 8)),
			workloads: []Workload{
				MakeWorkload("b1").Queue("b").GPUs(8).Admitted("f", 1*time.Hour, "f-00").Obj(),
				MakeWorkload("b2").Queue("b").GPUs(8).Priority(-1).Admitted("f", 2*time.Hour, "f-01").Obj(),
				MakeWorkload("a1").Queue("a").GPUs(8).Obj(),
			},
			want: []string{"preempted:b2<a1", "admitted:a1"},
		},
		"reclaim: never when the preemptor would borrow": {
			cluster: twoNodes(
				MakeQueue("a").Cohort("ab").Quota("f", 4).Preempt("", PreemptAny),
				MakeQueue("b").Cohort("ab").Quota("f", 12)),
			workloads: []Workload{
				MakeWorkload("b1").Queue("b").GPUs(8).Admitted("f", 1*time.Hour, "f-00").Obj(),
				MakeWorkload("b2").Queue("b").GPUs(8).Admitted("f", 2*time.Hour, "f-01").Obj(),
				MakeWorkload("a1").Queue("a").GPUs(8).Obj(),
			},
		},
		"reclaim: only from queues above nominal": {
			cluster: twoNodes(
				MakeQueue("a").Cohort("ab").Quota("f", 8).Preempt("", PreemptAny),
				MakeQueue("b").Cohort("ab").Quota("f", 8),
				MakeQueue("c").Cohort("ab").Quota("f", 8)),
			workloads: []Workload{
				MakeWorkload("b1").Queue("b").GPUs(8).Admitted("f", 1*time.Hour, "f-00").Obj(),
				MakeWorkload("c1").Queue("c").GPUs(8).Admitted("f", 2*time.Hour, "f-01").Obj(),
				MakeWorkload("a1").Queue("a").GPUs(8).Obj(),
			},
		},
		"reclaim: stops once the lender is back at nominal": {
			// b borrows 4 (b1 4 GPUs on f-00, b2 8 on f-01). Evicting b1
			// brings b to nominal, so b2 is no candidate any more; a1
			// (host) still has no whole node: nothing happens.
			cluster: twoNodes(
				MakeQueue("a").Cohort("abc").Quota("f", 8).Preempt("", PreemptAny),
				MakeQueue("b").Cohort("abc").Quota("f", 8),
				MakeQueue("c").Cohort("abc").Quota("f", 8)),
			workloads: []Workload{
				MakeWorkload("b1").Queue("b").GPUs(4).Admitted("f", 2*time.Hour, "f-00").Obj(),
				MakeWorkload("c1").Queue("c").GPUs(4).Admitted("f", 1*time.Hour, "f-00").Obj(),
				MakeWorkload("b2").Queue("b").GPUs(8).Admitted("f", 1*time.Hour, "f-01").Obj(),
				MakeWorkload("a1").Queue("a").GPUs(8).Topology(LevelHost).Obj(),
			},
		},
		"reclaim and within queue: borrowers first": {
			// a could also preempt its own lower-priority a-low, but
			// Kueue takes from the borrowing queue first, most recently
			// admitted first, and only while it borrows.
			cluster: twoNodes(
				MakeQueue("a").Cohort("ab").Quota("f", 8).Preempt(PreemptLowerPriority, PreemptAny),
				MakeQueue("b").Cohort("ab").Quota("f", 8)),
			workloads: []Workload{
				MakeWorkload("a-low").Queue("a").GPUs(4).Priority(-5).Admitted("f", 3*time.Hour, "f-00").Obj(),
				MakeWorkload("b1").Queue("b").GPUs(4).Admitted("f", 1*time.Hour, "f-00").Obj(),
				MakeWorkload("b2").Queue("b").GPUs(4).Admitted("f", 2*time.Hour, "f-01").Obj(),
				MakeWorkload("b3").Queue("b").GPUs(4).Admitted("f", 0, "f-01").Obj(),
				MakeWorkload("a1").Queue("a").GPUs(4).Obj(),
			},
			want: []string{"preempted:b2<a1", "admitted:a1"},
		},
		"BestEffortFIFO: a workload that does not fit does not block": {
			cluster: oneNode(MakeQueue("a").Quota("f", 8)),
			workloads: []Workload{
				MakeWorkload("run").Queue("a").GPUs(4).Admitted("f", 0, "f-00").Obj(),
				MakeWorkload("big").Queue("a").GPUs(8).Priority(10).Obj(),
				MakeWorkload("small").Queue("a").GPUs(2).Created(time.Hour).Obj(),
			},
			want: []string{"admitted:small"},
		},
		"order: priority first, then Created": {
			cluster: oneNode(MakeQueue("a").Quota("f", 8)),
			workloads: []Workload{
				MakeWorkload("c").Queue("a").GPUs(4).Created(2 * time.Hour).Obj(),
				MakeWorkload("b").Queue("a").GPUs(4).Created(time.Hour).Obj(),
				MakeWorkload("a").Queue("a").GPUs(4).Created(3 * time.Hour).Priority(1).Obj(),
			},
			want: []string{"admitted:a", "admitted:b"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newSnapshot(t, tc.cluster, tc.workloads...)
			got := evs(s.Schedule())
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFlavorAssignment(t *testing.T) {
	c := MakeCluster().Flavor("h100", 8).Flavor("a100", 8).
		Nodes("h100", 1, 8, 0, 0).Nodes("a100", 1, 8, 0, 0).
		Queue(MakeQueue("a").Quota("h100", 8).Quota("a100", 8)).
		Queue(MakeQueue("b").Quota("a100", 8).Quota("h100", 8)).Obj()
	cases := map[string]struct {
		workloads []Workload
		want      map[string]string
	}{
		"first flavor in the queue's order": {
			workloads: []Workload{MakeWorkload("x").Queue("a").GPUs(4).Obj(), MakeWorkload("y").Queue("b").GPUs(4).Obj()},
			want:      map[string]string{"x": "h100", "y": "a100"},
		},
		"next flavor when the first is full": {
			workloads: []Workload{
				MakeWorkload("x").Queue("a").GPUs(8).Obj(),
				MakeWorkload("y").Queue("a").GPUs(8).Created(time.Minute).Obj(),
			},
			want: map[string]string{"x": "h100", "y": "a100"},
		},
		"pinned flavor": {
			workloads: []Workload{MakeWorkload("x").Queue("a").GPUs(4).Flavor("a100").Obj()},
			want:      map[string]string{"x": "a100"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newSnapshot(t, c, tc.workloads...)
			s.Schedule()
			if diff := cmp.Diff(tc.want, admittedOn(s)); diff != "" {
				t.Errorf("flavors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFairSharing(t *testing.T) {
	cluster := func(penalty time.Duration, wa float64) *Cluster {
		return MakeCluster().Flavor("f", 8).Nodes("f", 1, 8, 0, 0).
			Queue(MakeQueue("a").Cohort("x").Quota("f", 4).Weight(wa)).
			Queue(MakeQueue("b").Cohort("x").Quota("f", 4)).
			Fair(time.Hour, penalty).Obj()
	}
	cases := map[string]struct {
		cluster   *Cluster
		usage     map[string]float64
		workloads []Workload
		wantOrder []string
		want      []string
	}{
		"lower usage goes first": {
			cluster: cluster(0, 0),
			usage:   map[string]float64{"a": 10, "b": 1},
			workloads: []Workload{
				MakeWorkload("a1").Queue("a").GPUs(8).Obj(),
				MakeWorkload("b1").Queue("b").GPUs(8).Created(time.Hour).Obj(),
			},
			wantOrder: []string{"b1", "a1"},
			want:      []string{"admitted:b1"},
		},
		"weight divides usage": {
			cluster: cluster(0, 4),
			usage:   map[string]float64{"a": 10, "b": 3},
			workloads: []Workload{
				MakeWorkload("a1").Queue("a").GPUs(8).Created(time.Hour).Obj(),
				MakeWorkload("b1").Queue("b").GPUs(8).Obj(),
			},
			wantOrder: []string{"a1", "b1"},
			want:      []string{"admitted:a1"},
		},
		"priority before usage": {
			cluster: cluster(0, 0),
			usage:   map[string]float64{"a": 10},
			workloads: []Workload{
				MakeWorkload("a1").Queue("a").GPUs(8).Priority(1).Obj(),
				MakeWorkload("b1").Queue("b").GPUs(8).Obj(),
			},
			wantOrder: []string{"a1", "b1"},
			want:      []string{"admitted:a1"},
		},
		"no penalty: arrival order between equal queues": {
			cluster: cluster(0, 0),
			workloads: []Workload{
				MakeWorkload("a1").Queue("a").GPUs(2).Obj(),
				MakeWorkload("a2").Queue("a").GPUs(2).Created(time.Minute).Obj(),
				MakeWorkload("a3").Queue("a").GPUs(2).Created(2 * time.Minute).Obj(),
				MakeWorkload("b1").Queue("b").GPUs(4).Created(3 * time.Minute).Obj(),
			},
			wantOrder: []string{"a1", "a2", "a3", "b1"},
			want:      []string{"admitted:a1", "admitted:a2", "admitted:a3"},
		},
		"equal queues, equal arrival: the ID decides": {
			cluster: cluster(0, 0),
			workloads: []Workload{
				MakeWorkload("q2").Queue("a").GPUs(8).Obj(),
				MakeWorkload("q1").Queue("b").GPUs(8).Obj(),
			},
			wantOrder: []string{"q1", "q2"},
			want:      []string{"admitted:q1"},
		},
		"entry penalty reorders the rest of the cycle": {
			cluster: cluster(time.Hour, 0),
			workloads: []Workload{
				MakeWorkload("a1").Queue("a").GPUs(2).Obj(),
				MakeWorkload("a2").Queue("a").GPUs(2).Created(time.Minute).Obj(),
				MakeWorkload("a3").Queue("a").GPUs(2).Created(2 * time.Minute).Obj(),
				MakeWorkload("b1").Queue("b").GPUs(4).Created(3 * time.Minute).Obj(),
			},
			wantOrder: []string{"a1", "a2", "a3", "b1"},
			want:      []string{"admitted:a1", "admitted:b1", "admitted:a2"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := NewSnapshot(tc.cluster, t0, tc.workloads, tc.usage)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { checkInvariants(t, s) })
			if diff := cmp.Diff(tc.wantOrder, s.Order()); diff != "" {
				t.Errorf("order (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.want, evs(s.Schedule())); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPenaltyAddsUsage(t *testing.T) {
	c := MakeCluster().Flavor("f", 8).Nodes("f", 1, 8, 0, 0).
		Queue(MakeQueue("a").Quota("f", 8)).Fair(time.Hour, 30*time.Minute).Obj()
	s := newSnapshot(t, c, MakeWorkload("a1").Queue("a").GPUs(4).Obj())
	s.Schedule()
	if diff := cmp.Diff(map[string]float64{"a": 2}, s.Usage()); diff != "" {
		t.Errorf("usage after a 4-GPU admission with a 30m penalty:\n%s", diff)
	}
}

func TestAdvance(t *testing.T) {
	c := MakeCluster().Flavor("f", 8).Nodes("f", 1, 8, 0, 0).Queue(MakeQueue("a").Quota("f", 8)).Obj()
	s := newSnapshot(t, c,
		MakeWorkload("run").Queue("a").GPUs(8).Duration(2*time.Hour).Admitted("f", 0, "f-00").Obj(),
		MakeWorkload("next").Queue("a").GPUs(8).Duration(time.Hour).Obj(),
		MakeWorkload("forever").Queue("a").GPUs(8).Created(time.Minute).Obj(),
	)
	got := s.Advance(t0.Add(5*time.Hour), nil)
	want := []Event{
		{Kind: EventFinished, ID: "run", At: t0.Add(2 * time.Hour)},
		{Kind: EventAdmitted, ID: "next", At: t0.Add(2 * time.Hour), Admission: &Admission{Flavor: "f", At: t0.Add(2 * time.Hour), Nodes: []string{"f-00"}}},
		{Kind: EventFinished, ID: "next", At: t0.Add(3 * time.Hour)},
		{Kind: EventAdmitted, ID: "forever", At: t0.Add(3 * time.Hour), Admission: &Admission{Flavor: "f", At: t0.Add(3 * time.Hour), Nodes: []string{"f-00"}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if !s.Now().Equal(t0.Add(5 * time.Hour)) {
		t.Errorf("Now = %v", s.Now())
	}
	// 8 GPUs for 5 hours, no decay.
	if diff := cmp.Diff(map[string]float64{"a": 40}, s.Usage()); diff != "" {
		t.Errorf("usage:\n%s", diff)
	}
	if got := s.Advance(t0, nil); got != nil {
		t.Errorf("advancing backwards: %v", got)
	}
}
