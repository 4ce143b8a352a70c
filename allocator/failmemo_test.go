package allocator

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// memoCluster is the benchmarks' kind of cluster at a scale: nodes per flavor, and
// quotas that add up to the cluster; with tight, quotas that add up to
// three quarters of it and borrowing limits on two queues, so that the
// GPUs may exceed a queue's quota while the nodes hold its pods.
func memoCluster(nodes int, tight bool) *Cluster {
	c := MakeCluster().Fair(24*time.Hour, 5*time.Minute)
	for _, f := range []string{"h100", "a100"} {
		c.Flavor(f, 8)
		for i := range nodes {
			r := i / 16
			c.Node(fmt.Sprintf("%s-%04d", f, i), f, 8, fmt.Sprintf("b%d", r/8), fmt.Sprintf("r%d", r))
		}
	}
	pol := []Preemption{
		{WithinClusterQueue: PreemptLowerPriority, ReclaimWithinCohort: PreemptAny},
		{WithinClusterQueue: PreemptLowerOrNewerEqualPriority, ReclaimWithinCohort: PreemptLowerPriority},
		{ReclaimWithinCohort: PreemptAny},
		{WithinClusterQueue: PreemptLowerPriority},
	}
	quota := nodes * 8 / 4
	if tight {
		quota = quota * 3 / 4
	}
	for q := range 4 {
		qw := MakeQueue(fmt.Sprintf("team%d", q)).Cohort("research").Weight(float64(1 + q%2))
		if q < 2 {
			qw.Quota("h100", quota).Quota("a100", quota)
		} else {
			qw.Quota("a100", quota).Quota("h100", quota)
		}
		if tight && q%2 == 0 {
			qw.BorrowingLimit("h100", quota/8).BorrowingLimit("a100", quota/4)
		}
		qw.Preemption = pol[q]
		c.Queue(qw)
	}
	return c.Obj()
}

// TestFailMemoChangesNothing holds the estimates (hundreds of Schedule
// calls each, in the AdmissionFairSharing mode that uses the memo, with
// preemption of every kind) equal to those computed with every
// nomination run, on the benchmark's kind of cluster at three scales,
// and at two with quotas below the cluster's size and borrowing limits.
// Each of the memo's conditions (failmemo.go, and the rise counters of
// setFree) was checked to be needed: leaving one out, or loosening it,
// fails this test.
func TestFailMemoChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		nodes, running, pending, seeds int
		tight                          bool
	}{{40, 150, 500, 30, false}, {200, 700, 2500, 8, false}, {1000, 3000, 10000, 1, false}, {40, 150, 500, 20, true}, {200, 700, 2500, 4, true}} {
		for seed := range uint64(tc.seeds) {
			r := rand.New(rand.NewPCG(seed, 7))
			c := memoCluster(tc.nodes, tc.tight)
			s, err := NewSnapshot(c, t0, benchWorkloads(r, tc.running+tc.pending, t0), map[string]float64{"team1": 100})
			if err != nil {
				t.Fatal(err)
			}
			s.Schedule()
			ws := s.Workloads()
			spreadAdmissions(r, ws, t0)
			with, err := NewSnapshot(c, t0, ws, s.Usage())
			if err != nil {
				t.Fatal(err)
			}
			without, err := NewSnapshot(c, t0, ws, s.Usage())
			if err != nil {
				t.Fatal(err)
			}
			without.ix.noFailMemo = true
			opts := EstimateOptions{Factors: map[string]Range{"team0": {Low: 0.3, High: 1.2}}}
			if d := cmp.Diff(Estimates(without, opts), Estimates(with, opts)); d != "" {
				t.Fatalf("nodes %d, tight %v, seed %d: estimates differ with the memo (-without +with):\n%s", tc.nodes, tc.tight, seed, d)
			}
		}
	}
}

// TestRiseCounters holds setFree's rise counters to their definition
// (rise[m] moves when a node's ⌊free/m⌋ grows) for every change of a
// node's free count, on a flavor of 8-GPU nodes (the tabulated steps,
// riseMasks) and one of 64 (computed).
func TestRiseCounters(t *testing.T) {
	c := MakeCluster().Flavor("small", 8).Node("s0", "small", 8, "b", "r").
		Flavor("big", 64).Node("b0", "big", 64, "b2", "r2").Obj()
	s, err := NewSnapshot(c, t0, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"s0", "b0"} {
		n := s.ix.nodeIdx[name]
		f := s.ix.nodes[n].flavor
		size := int32(s.ix.nodes[n].gpus)
		if got := s.ix.flavors[f].rises == nil; got != (size > 63) {
			t.Fatalf("%s: tabulated %v for %d GPUs", name, !got, size)
		}
		st := &s.fl[f]
		for old := int32(0); old <= size; old++ {
			for v := int32(0); v <= size; v++ {
				s.setFree(n, old)
				before := append([]uint64(nil), st.rise...)
				s.setFree(n, v)
				for m := range st.rise {
					want := before[m]
					if m >= 1 && int32(m) <= v && v/int32(m) > old/int32(m) {
						want++
					}
					if st.rise[m] != want {
						t.Fatalf("%s: free %d → %d: rise[%d] = %d, want %d", name, old, v, m, st.rise[m], want)
					}
				}
			}
		}
		s.setFree(n, size)
	}
}
