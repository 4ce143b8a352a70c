package allocator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Kueue v0.17's cycle and flavor assignment, case by case, each outcome
// worked out by hand from Kueue's source (the functions named in the
// comments, kubernetes-sigs/kueue at v0.17.0). Every case runs one
// Schedule (Kueue's cycles until nothing is left to try) and compares
// the events; "on" names the flavor the last admitted workload got. A
// case on a cluster the GPU-only engine schedules runs on the general
// engine too (toGeneral), so that both are held to the expected outcome.

type kueueCase struct {
	cluster   *Cluster
	workloads []Workload
	want      []string
	on        map[string]string
}

func runKueueCases(t *testing.T, cases map[string]kueueCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			engines := []string{"general"}
			if newSnapshot(t, tc.cluster, tc.workloads...).ix.simple {
				engines = []string{"GPU-only", "general"}
			}
			for _, engine := range engines {
				s := newSnapshot(t, tc.cluster, tc.workloads...)
				if engine == "general" && s.ix.simple {
					s = toGeneral(s)
				}
				got := evs(s.Schedule())
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("%s engine: events (-want +got):\n%s", engine, diff)
				}
				for id, f := range tc.on {
					if w, _ := s.Workload(id); w.Admission == nil || w.Admission.Flavor != f {
						t.Errorf("%s engine: %s admitted on %v, want %s", engine, id, w.Admission, f)
					}
				}
			}
		})
	}
}

// One flavor f of n nodes of 8 GPUs, and queues.
func flavorF(n int, queues ...*queueWrapper) *clusterWrapper {
	c := MakeCluster().Flavor("f", 8).Nodes("f", n, 8, 0, 0)
	for _, q := range queues {
		c.Queue(q)
	}
	return c
}

// Two flavors f1 and f2 of one node of 8 GPUs each.
func flavorsF1F2(queues ...*queueWrapper) *clusterWrapper {
	c := MakeCluster().Flavor("f1", 8).Flavor("f2", 8).Nodes("f1", 1, 8, 0, 0).Nodes("f2", 1, 8, 0, 0)
	for _, q := range queues {
		c.Queue(q)
	}
	return c
}

// flavorassigner.fitsResourceQuota: when the request does not fit the
// available quota, preemption is tried only if the request is within the
// queue's nominal quota (val <= rQuota.Nominal), or reclaiming inside a
// subtree could make room (FindHeightOfLowestSubtreeThatFits), or the
// queue may preempt while borrowing; otherwise the flavor is NoFit and
// the workload waits.
func TestKueuePreemptsOnlyWithinNominal(t *testing.T) {
	// f: 3 nodes. a: nominal 8, b: nominal 16, one cohort (pool 24). a
	// runs low (4, f-00); b runs b1 (16, f-01 f-02) and b2 (4, f-00),
	// borrowing 4 of a's quota. Cohort use C = 4 + 20 = 24: a has 0
	// available.
	cluster := func() *Cluster {
		return flavorF(3,
			MakeQueue("a").Cohort("ab").Quota("f", 8).Preempt(PreemptLowerPriority, PreemptAny),
			MakeQueue("b").Cohort("ab").Quota("f", 16)).Obj()
	}
	running := []Workload{
		MakeWorkload("low").Queue("a").GPUs(4).Admitted("f", time.Hour, "f-00").Obj(),
		MakeWorkload("b1").Queue("b").GPUs(16).Admitted("f", time.Hour, "f-01", "f-02").Obj(),
		MakeWorkload("b2").Queue("b").GPUs(4).Admitted("f", 2*time.Hour, "f-00").Obj(),
	}
	runKueueCases(t, map[string]kueueCase{
		"8 GPUs, within a's nominal 8: preemption is tried": {
			// The search (classicalPreemptions, borrowing not allowed
			// first: a is under nominal but 4+8 > 8, so b's workloads are
			// ReclaimWithoutBorrowing candidates): b2 (b's newest) then
			// low go; b1 is no candidate once b is back at nominal. The
			// fill-back cannot spare b2 (a would have 4).
			cluster:   cluster(),
			workloads: append(running, MakeWorkload("high").Queue("a").GPUs(8).Priority(10).Obj()),
			want:      []string{"preempted:b2<high", "preempted:low<high", "admitted:high"},
		},
		"12 GPUs, above a's nominal 8: NoFit, no preemption": {
			cluster:   cluster(),
			workloads: append(running, MakeWorkload("high").Queue("a").GPUs(12).Priority(10).Obj()),
		},
		"16 GPUs, above a's nominal 8: a's own low is not preempted, though it would make room": {
			// b runs b1 (8, within its nominal): 8 are free, high needs
			// 16. Without low, a would use 16 (borrowing 8) and the
			// cohort 24: it would fit, but 16 > a's nominal 8 is NoFit
			// before any preemption is searched.
			cluster: cluster(),
			workloads: []Workload{
				MakeWorkload("low").Queue("a").GPUs(8).Admitted("f", time.Hour, "f-00").Obj(),
				MakeWorkload("b1").Queue("b").GPUs(8).Admitted("f", time.Hour, "f-01").Obj(),
				MakeWorkload("high").Queue("a").GPUs(16).Priority(10).Obj(),
			},
		},
	})
}

// findFlavorForPodSets with Kueue's default flavorFungibility
// (whenCanPreempt TryNextFlavor) goes through every flavor where
// preemption would be needed and keeps the best by isPreferred
// (BorrowingOverPreemption: reclaim from other queues beats preempting in
// the queue itself, then less borrowing, then the earlier flavor).
func TestKueueFlavorPreference(t *testing.T) {
	// a: f1 8, f2 8; b: nothing, borrows a's f2. a runs alow on f1; b
	// runs b1 on f2.
	cluster := flavorsF1F2(
		MakeQueue("a").Cohort("ab").Quota("f1", 8).Quota("f2", 8).Preempt(PreemptLowerPriority, PreemptAny),
		MakeQueue("b").Cohort("ab").Quota("f1", 0).Quota("f2", 0)).Obj()
	runKueueCases(t, map[string]kueueCase{
		"reclaim on f2 beats preempting a's own work on f1": {
			// f1: a's own alow is a target (preempt, no borrowing after);
			// f2: b1 borrows a's quota (reclaim, no borrowing after).
			cluster: cluster,
			workloads: []Workload{
				MakeWorkload("alow").Queue("a").GPUs(8).Admitted("f1", 0, "f1-00").Obj(),
				MakeWorkload("b1").Queue("b").GPUs(8).Admitted("f2", 0, "f2-00").Obj(),
				MakeWorkload("x").Queue("a").GPUs(8).Priority(10).Obj(),
			},
			want: []string{"preempted:b1<x", "admitted:x"},
			on:   map[string]string{"x": "f2"},
		},
		"a flavor where it fits beats any preemption": {
			cluster: cluster,
			workloads: []Workload{
				MakeWorkload("alow").Queue("a").GPUs(8).Admitted("f1", 0, "f1-00").Obj(),
				MakeWorkload("x").Queue("a").GPUs(8).Priority(10).Obj(),
			},
			want: []string{"admitted:x"},
			on:   map[string]string{"x": "f2"},
		},
	})
}

// scheduler.go, schedule: a cycle takes one head per ClusterQueue
// (queues.Heads) and orders the heads by makeClassicalIterator: those
// that fit within nominal quota first (assignment.Borrows()), then
// priority, then creation time.
func TestKueueHeadsWithinNominalFirst(t *testing.T) {
	// a and b, nominal 8 each of 16 GPUs; b runs b1; b2 (b, earlier)
	// and a2 (a, later) wait, both fit now. b2 would borrow a's quota,
	// a2 would not: a2 goes first and b2 no longer fits.
	cluster := flavorF(2, MakeQueue("a").Cohort("ab").Quota("f", 8), MakeQueue("b").Cohort("ab").Quota("f", 8)).Obj()
	running := MakeWorkload("b1").Queue("b").GPUs(8).Admitted("f", 0, "f-01").Obj()
	runKueueCases(t, map[string]kueueCase{
		"the head that does not borrow goes first": {
			cluster: cluster,
			workloads: []Workload{running,
				MakeWorkload("b2").Queue("b").GPUs(8).Created(time.Minute).Obj(),
				MakeWorkload("a2").Queue("a").GPUs(8).Created(2 * time.Minute).Obj(),
			},
			want: []string{"admitted:a2"},
		},
		"even before a higher priority that would borrow": {
			cluster: cluster,
			workloads: []Workload{running,
				MakeWorkload("b2").Queue("b").GPUs(8).Priority(10).Created(time.Minute).Obj(),
				MakeWorkload("a2").Queue("a").GPUs(8).Created(2 * time.Minute).Obj(),
			},
			want: []string{"admitted:a2"},
		},
		"one head per queue a cycle: the other queue's head before a's second": {
			// a's a2 and a3 came before b's b3, and there is room for two:
			// the first cycle takes a2 and b3, one head of each queue.
			cluster: flavorF(2, MakeQueue("a").Cohort("ab").Quota("f", 8), MakeQueue("b").Cohort("ab").Quota("f", 8)).Obj(),
			workloads: []Workload{
				MakeWorkload("a2").Queue("a").GPUs(8).Obj(),
				MakeWorkload("a3").Queue("a").GPUs(8).Created(time.Minute).Obj(),
				MakeWorkload("b3").Queue("b").GPUs(8).Created(2 * time.Minute).Obj(),
			},
			want: []string{"admitted:a2", "admitted:b3"},
		},
	})
}

// scheduler.go, schedule: a head that needs preemption but has no
// targets holds, for the rest of its cycle, the quota it would take
// (resourcesToReserve, unless preemption.CanAlwaysReclaim: reclaim Any),
// so that lower-priority work does not take it in the same cycle.
func TestKueueHoldsCapacityForPreemption(t *testing.T) {
	// f: 8 GPUs. a: nominal 8, reclaims LowerPriority; b: nominal 0.
	// b's B0 (priority 20) borrows 4. H (a, 8, priority 10) does not fit
	// (4 available) and has no targets (B0 is of higher priority): it
	// holds a's 8, so b's L1 (4, borrowing) does not fit in cycle 1.
	// Cycle 2: H is inadmissible; a's H2 (4, within nominal) goes before
	// L1 (borrowing) and takes the room; L1 is NoFit in cycle 3. Without
	// the hold L1 would be admitted in cycle 1 and preempted by H2 (a
	// reclaims LowerPriority) in cycle 2.
	cluster := flavorF(1,
		MakeQueue("a").Cohort("ab").Quota("f", 8).Preempt("", PreemptLowerPriority),
		MakeQueue("b").Cohort("ab").Quota("f", 0)).Obj()
	runKueueCases(t, map[string]kueueCase{
		"L1 never gets the room H holds": {
			cluster: cluster,
			workloads: []Workload{
				MakeWorkload("B0").Queue("b").GPUs(4).Priority(20).Admitted("f", 0, "f-00").Obj(),
				MakeWorkload("H").Queue("a").GPUs(8).Priority(10).Obj(),
				MakeWorkload("H2").Queue("a").GPUs(4).Priority(5).Created(time.Minute).Obj(),
				MakeWorkload("L1").Queue("b").GPUs(4).Created(2 * time.Minute).Obj(),
			},
			want: []string{"admitted:H2"},
		},
	})
}

// scheduler.go, schedule: a head whose targets another head of the same
// cycle already preempts is skipped ("overlapping preemption targets")
// and tried again in the next cycle.
func TestKueueOverlappingTargets(t *testing.T) {
	// c borrows all 8 GPUs with V; a and b (nominal 4 each, reclaim Any)
	// both nominate V as their target. A goes first and preempts it; B
	// is retried next cycle and fits in the room V left.
	cluster := flavorF(1,
		MakeQueue("a").Cohort("abc").Quota("f", 4).Preempt("", PreemptAny),
		MakeQueue("b").Cohort("abc").Quota("f", 4).Preempt("", PreemptAny),
		MakeQueue("c").Cohort("abc").Quota("f", 0)).Obj()
	runKueueCases(t, map[string]kueueCase{
		"the second head is retried, not preempting again": {
			cluster: cluster,
			workloads: []Workload{
				MakeWorkload("V").Queue("c").GPUs(8).Admitted("f", 0, "f-00").Obj(),
				MakeWorkload("A").Queue("a").GPUs(4).Obj(),
				MakeWorkload("B").Queue("b").GPUs(4).Created(time.Minute).Obj(),
			},
			want: []string{"preempted:V<A", "admitted:A", "admitted:B"},
		},
	})
}
