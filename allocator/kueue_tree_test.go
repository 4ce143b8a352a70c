package allocator

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Hierarchical cohorts with quota of their own, borrowWithinCohort and
// flavorFungibility, worked out by hand from Kueue v0.17.0's source.

// Kueue's cohort page (site/content/en/docs/concepts/cohort.md): a
// Cohort's nominalQuota is an additional shared pool for the
// ClusterQueues under it; borrowing and lending limits on a Cohort
// bound what its subtree takes from and gives to its parent. The
// arithmetic is resource_node.go's available and potentialAvailable.
// Root R has cohorts X (quota 8 of its own) and Y; x1 (nominal 0) is in
// X, y1 (nominal 8) in Y; the flavor has 16 one-GPU nodes so that only
// quota counts.
func TestKueueCohortTreeQuota(t *testing.T) {
	tree := func(mutate func(*clusterWrapper)) *Cluster {
		c := MakeCluster().Flavor("f", 1).Nodes("f", 16, 1, 0, 0).
			CohortTree("R", "").CohortTree("X", "R").CohortQuota("f", 8).CohortTree("Y", "R").
			Queue(MakeQueue("x1").Cohort("X").Quota("f", 0)).
			Queue(MakeQueue("y1").Cohort("Y").Quota("f", 8))
		if mutate != nil {
			mutate(c)
		}
		return c.Obj()
	}
	limits := func(borrow, lend *int64) func(*clusterWrapper) {
		return func(c *clusterWrapper) {
			for i := range c.Cohorts {
				if c.Cohorts[i].Name == "X" {
					q := c.Cohorts[i].Quotas["f"]
					if borrow != nil {
						b := int(*borrow)
						q.BorrowingLimit = &b
					}
					if lend != nil {
						l := int(*lend)
						q.LendingLimit = &l
					}
					c.Cohorts[i].Quotas["f"] = q
				}
			}
		}
	}
	two := int64(2)
	cases := map[string]struct {
		cluster  *Cluster
		admitted []Workload
		queue    string
		want     int // largest request that fits now
	}{
		"x1 uses X's pool and borrows y1's unused quota through R": {cluster: tree(nil), queue: "x1", want: 16},
		"y1 borrows X's pool through R":                            {cluster: tree(nil), queue: "y1", want: 16},
		"with y1 using its 8, x1 has X's 8": {cluster: tree(nil), queue: "x1", want: 8,
			admitted: []Workload{MakeWorkload("y").Queue("y1").GPUs(8).Obj()}},
		"X lends R only 2 (lendingLimit): y1 gets 8 + 2":      {cluster: tree(limits(nil, &two)), queue: "y1", want: 10},
		"X lends R only 2: x1 still has 16":                   {cluster: tree(limits(nil, &two)), queue: "x1", want: 16},
		"X borrows at most 2 (borrowingLimit): x1 gets 8 + 2": {cluster: tree(limits(&two, nil)), queue: "x1", want: 10},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newSnapshot(t, tc.cluster)
			for i, w := range tc.admitted {
				w.ID = w.ID + string(rune('0'+i))
				if _, err := s.Add(w); err != nil {
					t.Fatal(err)
				}
				s.Schedule()
			}
			largest := 0
			for g := 1; g <= 16; g++ {
				if _, r := s.Fit(MakeWorkload("probe").Queue(tc.queue).GPUs(g).Obj()); r == ReasonNone {
					largest = g
				}
			}
			if largest != tc.want {
				t.Errorf("largest that fits: %d, want %d", largest, tc.want)
			}
		})
	}
}

// Hierarchical reclaim (classical/hierarchical_preemption.go,
// collectCandidatesForHierarchicalReclaim): once the request fits in a
// subtree's quota (here cohort X's own 8), the preemptor may take back
// that quota from workloads of other subtrees whatever their priority
// (HierarchicalReclaim), as its ReclaimWithinCohort allows.
func TestKueueHierarchicalReclaim(t *testing.T) {
	cluster := func() *Cluster {
		return MakeCluster().Flavor("f", 8).Nodes("f", 1, 8, 0, 0).
			CohortTree("R", "").CohortTree("X", "R").CohortTree("Y", "R").
			Queue(MakeQueue("x1").Cohort("X").Quota("f", 0).Preempt("", PreemptAny)).
			Queue(MakeQueue("y1").Cohort("Y").Quota("f", 0)).
			Obj()
	}
	withQuota := func(c *Cluster, cohort string) *Cluster {
		for i := range c.Cohorts {
			if c.Cohorts[i].Name == cohort {
				c.Cohorts[i].Quotas["f"] = Quota{Nominal: 8}
			}
		}
		return c
	}
	workloads := []Workload{
		MakeWorkload("Y1").Queue("y1").GPUs(8).Priority(10).Admitted("f", 0, "f-00").Obj(),
		MakeWorkload("P").Queue("x1").GPUs(8).Obj(),
	}
	runKueueCases(t, map[string]kueueCase{
		"X's quota: x1's lower-priority P reclaims it from y1's Y1": {
			// fitsResourceQuota: P is above x1's nominal 0, but it fits in
			// X without borrowing from R (mayReclaimInHierarchy).
			cluster: withQuota(cluster(), "X"), workloads: workloads,
			want: []string{"preempted:Y1<P", "admitted:P"},
		},
		"Y's quota: Y1 is within its subtree's quota, P waits": {
			cluster: withQuota(cluster(), "Y"), workloads: workloads,
		},
	})
}

// borrowWithinCohort (classical/hierarchical_preemption.go,
// classifyPreemptionVariant; flavorassigner canPreemptWhileBorrowing): a
// queue may preempt lower-priority work of a queue that borrows even
// when it would then borrow itself; maxPriorityThreshold limits that to
// work of at most that priority.
func TestKueueBorrowWithinCohort(t *testing.T) {
	// f: 8 GPUs. a and b have 4 each. b runs b1 (2) and b2 (4): it
	// borrows 2 of a's. x (a, 6, priority 10) would borrow 2: above a's
	// nominal, so only borrowWithinCohort lets it preempt. Kueue's
	// search (with borrowing first: candidates ReclaimWhileBorrowing)
	// takes b2, b's newest; then b is within nominal and b1 is safe.
	cluster := func(q *queueWrapper) *Cluster {
		return flavorF(1, q, MakeQueue("b").Cohort("ab").Quota("f", 4)).Obj()
	}
	workloads := []Workload{
		MakeWorkload("b1").Queue("b").GPUs(2).Admitted("f", time.Hour, "f-00").Obj(),
		MakeWorkload("b2").Queue("b").GPUs(4).Admitted("f", 2*time.Hour, "f-00").Obj(),
		MakeWorkload("x").Queue("a").GPUs(6).Priority(10).Obj(),
	}
	a := func() *queueWrapper {
		return MakeQueue("a").Cohort("ab").Quota("f", 4).Preempt("", PreemptLowerPriority)
	}
	runKueueCases(t, map[string]kueueCase{
		"Never (the default): x waits": {cluster: cluster(a()), workloads: workloads},
		"LowerPriority: x preempts b2 and borrows": {cluster: cluster(a().BorrowWithin()), workloads: workloads,
			want: []string{"preempted:b2<x", "admitted:x"}},
		"LowerPriority, maxPriorityThreshold -1: b2 (0) is above it, x waits": {
			cluster: cluster(a().BorrowWithin(-1)), workloads: workloads},
	})
}

// flavorFungibility (flavorassigner shouldTryNextFlavor, isPreferred).
func TestKueueFlavorFungibility(t *testing.T) {
	borrowing := func(whenCanBorrow string) *Cluster {
		// a's f1 quota is 0 (it can only borrow b's), its f2 quota 8.
		return flavorsF1F2(
			MakeQueue("a").Cohort("ab").Quota("f1", 0).Quota("f2", 8).Fungibility(whenCanBorrow, "", ""),
			MakeQueue("b").Cohort("ab").Quota("f1", 8).Quota("f2", 0)).Obj()
	}
	preempting := func(whenCanPreempt string) *Cluster {
		return flavorsF1F2(MakeQueue("a").Quota("f1", 8).Quota("f2", 8).Preempt(PreemptLowerPriority, "").
			Fungibility("", whenCanPreempt, "")).Obj()
	}
	preference := func(pref string) *Cluster {
		// f1: a can only borrow (fit, borrowing); f2: a's own alow must
		// go (preempt, no borrowing).
		return flavorsF1F2(
			MakeQueue("a").Cohort("ab").Quota("f1", 0).Quota("f2", 8).Preempt(PreemptLowerPriority, "").
				Fungibility(TryNextFlavor, TryNextFlavor, pref),
			MakeQueue("b").Cohort("ab").Quota("f1", 8).Quota("f2", 0)).Obj()
	}
	x := MakeWorkload("x").Queue("a").GPUs(4).Obj()
	alowF1 := MakeWorkload("alow").Queue("a").GPUs(8).Admitted("f1", 0, "f1-00").Obj()
	alowF2 := MakeWorkload("alow").Queue("a").GPUs(8).Admitted("f2", 0, "f2-00").Obj()
	high := MakeWorkload("x").Queue("a").GPUs(8).Priority(10).Obj()
	runKueueCases(t, map[string]kueueCase{
		"whenCanBorrow MayStopSearch (default): borrows on f1": {cluster: borrowing(""), workloads: []Workload{x},
			want: []string{"admitted:x"}, on: map[string]string{"x": "f1"}},
		"whenCanBorrow TryNextFlavor: f2, within nominal": {cluster: borrowing(TryNextFlavor), workloads: []Workload{x},
			want: []string{"admitted:x"}, on: map[string]string{"x": "f2"}},
		"whenCanPreempt TryNextFlavor (default): fits on f2": {cluster: preempting(""), workloads: []Workload{alowF1, high},
			want: []string{"admitted:x"}, on: map[string]string{"x": "f2"}},
		// The victim is pending again and fits on the other flavor.
		"whenCanPreempt MayStopSearch: preempts on f1": {cluster: preempting(MayStopSearch), workloads: []Workload{alowF1, high},
			want: []string{"preempted:alow<x", "admitted:x", "admitted:alow"}, on: map[string]string{"x": "f1", "alow": "f2"}},
		"preference BorrowingOverPreemption: borrows on f1": {cluster: preference(BorrowingOverPreemption), workloads: []Workload{alowF2, high},
			want: []string{"admitted:x"}, on: map[string]string{"x": "f1"}},
		"preference PreemptionOverBorrowing: preempts on f2": {cluster: preference(PreemptionOverBorrowing), workloads: []Workload{alowF2, high},
			want: []string{"preempted:alow<x", "admitted:x", "admitted:alow"}, on: map[string]string{"x": "f2", "alow": "f1"}},
	})
}

// CPU and memory next to GPUs: a queue's CPU quota, a resource it does
// not cover (flavorassigner: "resource ... unavailable in ClusterQueue":
// never admitted), and nodes' CPU (Topology Aware Scheduling counts
// every resource a pod asks for).
func TestKueueCPUAndMemory(t *testing.T) {
	quota := flavorF(1, MakeQueue("a").Quota("f", 8).CPU("f", 32).Preempt(PreemptLowerPriority, "")).Obj()
	r1 := MakeWorkload("r1").Queue("a").GPUs(4).CPU(24).Admitted("f", 0, "f-00").Obj()
	runKueueCases(t, map[string]kueueCase{
		"GPUs are free but CPU quota is not: waits": {cluster: quota,
			workloads: []Workload{r1, MakeWorkload("x").Queue("a").GPUs(4).CPU(16).Obj()}},
		"higher priority preempts for the CPU": {cluster: quota,
			workloads: []Workload{r1, MakeWorkload("x").Queue("a").GPUs(4).CPU(16).Priority(10).Obj()},
			want:      []string{"preempted:r1<x", "admitted:x"}},
		"memory without a memory quota: never": {cluster: quota,
			workloads: []Workload{MakeWorkload("x").Queue("a").GPUs(4).Memory(64).Obj()}},
	})
	t.Run("the blocker is named", func(t *testing.T) {
		s := newSnapshot(t, quota, r1, MakeWorkload("x").Queue("a").GPUs(4).CPU(16).Obj())
		s.Schedule()
		if r, res := s.DiagnoseResource("x"); r != ReasonQuota || res != ResourceCPU {
			t.Errorf("x waits for %s %s, want quota CPU", r, res)
		}
		if _, r, res := s.FitResource(MakeWorkload("y").Queue("a").GPUs(2).Memory(8).Obj()); r != ReasonQuota || res != ResourceMemory {
			t.Errorf("a memory request without memory quota: %s %s, want quota memory", r, res)
		}
	})
	t.Run("node CPU", func(t *testing.T) {
		// One node of 8 GPUs and 32 cores; the quota has room for 64.
		// r1 takes 24 cores: x (4 GPUs, 16 cores) fits the quota and the
		// GPUs, not the node's CPU; y (2 GPUs, 4 cores), after it, fits.
		c := MakeCluster().Flavor("f", 8).NodeRes("n", "f", 8, 32, 512).
			Queue(MakeQueue("a").Quota("f", 8).CPU("f", 64)).Obj()
		s := newSnapshot(t, c,
			MakeWorkload("r1").Queue("a").GPUs(2).CPU(24).Admitted("f", 0, "n").Obj(),
			MakeWorkload("x").Queue("a").GPUs(4).CPU(16).Obj(),
			MakeWorkload("y").Queue("a").GPUs(2).CPU(4).Created(time.Minute).Obj())
		if diff := cmp.Diff([]string{"admitted:y"}, evs(s.Schedule())); diff != "" {
			t.Errorf("events (-want +got):\n%s", diff)
		}
		if r, res := s.DiagnoseResource("x"); r != ReasonCapacity || res != ResourceCPU {
			t.Errorf("x waits for %s %s, want capacity CPU", r, res)
		}
	})
}
