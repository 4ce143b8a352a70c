package allocator

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// memoCluster is benchCluster at another scale: nodes per flavor, and
// quotas that add up to the cluster.
func memoCluster(nodes int) *Cluster {
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
	for q := range 4 {
		qw := MakeQueue(fmt.Sprintf("team%d", q)).Cohort("research").Weight(float64(1 + q%2))
		if q < 2 {
			qw.Quota("h100", quota).Quota("a100", quota)
		} else {
			qw.Quota("a100", quota).Quota("h100", quota)
		}
		qw.Preemption = pol[q]
		c.Queue(qw)
	}
	return c.Obj()
}

// TestFailMemoChangesNothing holds the estimates (hundreds of Schedule
// calls each, in the AdmissionFairSharing mode that uses the memo, with
// preemption of every kind) equal to those computed with every
// nomination run, on the benchmark's kind of cluster at three scales.
func TestFailMemoChangesNothing(t *testing.T) {
	for _, tc := range []struct{ nodes, running, pending, seeds int }{{40, 150, 500, 30}, {200, 700, 2500, 8}, {1000, 3000, 10000, 1}} {
		for seed := range uint64(tc.seeds) {
			r := rand.New(rand.NewPCG(seed, 7))
			c := memoCluster(tc.nodes)
			s, err := NewSnapshot(c, t0, benchWorkloads(r, tc.running+tc.pending, t0), map[string]float64{"team1": 100})
			if err != nil {
				t.Fatal(err)
			}
			s.Schedule()
			ws := s.Workloads()
			for i := range ws {
				if a := ws[i].Admission; a != nil {
					a.At = t0.Add(-time.Duration(r.Int64N(int64(ws[i].Duration))))
				}
			}
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
				t.Fatalf("nodes %d, seed %d: estimates differ with the memo (-without +with):\n%s", tc.nodes, seed, d)
			}
		}
	}
}
