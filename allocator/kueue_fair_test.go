package allocator

import (
	"math"
	"testing"
	"time"
)

// Kueue's Fair Sharing, worked out by hand from v0.17.0's source. One
// flavor of one 8-GPU node; cohort "pool" with a lender l (nominal 8)
// and a and b (nominal 0), so that everything a or b runs is borrowed
// and the lendable total (calculateLendable: the root's
// potentialAvailable) is 8: a queue borrowing g GPUs has a dominant
// resource share of g/8 × 1000, divided by its weight.
func fairPool(aw, bw float64, reclaimB string, strategies ...string) *Cluster {
	return flavorF(1,
		MakeQueue("l").Cohort("pool").Quota("f", 8),
		MakeQueue("a").Cohort("pool").Quota("f", 0).Weight(aw),
		MakeQueue("b").Cohort("pool").Quota("f", 0).Weight(bw).Preempt("", reclaimB)).
		KueueFairSharing(strategies...).Obj()
}

// fair_sharing_iterator.go: heads are taken by a tournament at each
// cohort, the child whose share would be lowest with its head admitted
// first (entryComparer.less: not borrowing on the requested flavor
// first, then CompareDRS, then priority, then time).
func TestKueueFairSharingOrder(t *testing.T) {
	// a runs a1 (6 of 8); a2 (a, 2, earlier) and b1 (b, 2, later) both
	// fit and there is room for one. With a2 a would borrow 8: share
	// 1000; with b1 b would borrow 2: 250. b1 goes first (classically
	// a2 would: both borrow, same priority, a2 is older).
	workloads := []Workload{
		MakeWorkload("a1").Queue("a").GPUs(6).Admitted("f", 0, "f-00").Obj(),
		MakeWorkload("a2").Queue("a").GPUs(2).Obj(),
		MakeWorkload("b1").Queue("b").GPUs(2).Created(time.Minute).Obj(),
	}
	classical := fairPool(1, 1, "")
	classical.Policy.FairSharing = nil
	runKueueCases(t, map[string]kueueCase{
		"the lower share goes first":                 {cluster: fairPool(1, 1, ""), workloads: workloads, want: []string{"admitted:b1"}},
		"without Fair Sharing, the older goes first": {cluster: classical, workloads: workloads, want: []string{"admitted:a2"}},
		// b's weight 0.2 makes its share 250/0.2 = 1250 > a's 1000.
		"weight: b at 0.2 goes after a": {cluster: fairPool(1, 0.2, ""), workloads: workloads, want: []string{"admitted:a2"}},
		// Weight 0 (ZeroWeight): a borrowing queue of weight 0 compares
		// above every other share (CompareDRS, zeroWeightBorrows).
		"weight 0: b goes after a": {cluster: fairPool(1, ZeroWeight, ""), workloads: workloads, want: []string{"admitted:a2"}},
	})
	t.Run("shares", func(t *testing.T) {
		s := newSnapshot(t, fairPool(1, 0.5, ""), MakeWorkload("a1").Queue("a").GPUs(6).Admitted("f", 0, "f-00").Obj(),
			MakeWorkload("b1").Queue("b").GPUs(2).Admitted("f", 0, "f-00").Obj())
		got := s.DominantShares()
		want := []float64{0, 750, 500} // l lends; a borrows 6/8; b 2/8 at weight 0.5
		for q, w := range want {
			if math.Abs(got[q].WeightedShare-w) > 1e-9 || got[q].Borrowing != (w > 0) || got[q].Resource != ResourceGPU {
				t.Errorf("%s: share %+v, want %v", s.ix.queues[q].name, got[q], w)
			}
		}
	})
}

// preemption.go fairPreemptions with Kueue's default strategies
// (LessThanOrEqualToFinalShare, then LessThanInitialShare): b, with
// b1 (4) added, has share 500; a borrows everything (1000).
func TestKueueFairSharingPreemption(t *testing.T) {
	b1 := MakeWorkload("b1").Queue("b").GPUs(4).Obj()
	twoOfFour := []Workload{
		MakeWorkload("a1").Queue("a").GPUs(4).Admitted("f", time.Hour, "f-00").Obj(),
		MakeWorkload("a2").Queue("a").GPUs(4).Admitted("f", 2*time.Hour, "f-00").Obj(),
		b1,
	}
	oneOfEight := []Workload{MakeWorkload("a1").Queue("a").GPUs(8).Admitted("f", time.Hour, "f-00").Obj(), b1}
	runKueueCases(t, map[string]kueueCase{
		// Taking a2 (a's newest) leaves a at 500: 500 <= 500, rule S2-a.
		"LessThanOrEqualToFinalShare takes a2": {cluster: fairPool(1, 1, PreemptAny), workloads: twoOfFour,
			want: []string{"preempted:a2<b1", "admitted:b1"}},
		// Taking a1 (8) would leave a at 0 < 500: S2-a refuses; S2-b
		// (b's 500 < a's 1000 now) takes it.
		"LessThanInitialShare takes what S2-a refuses": {cluster: fairPool(1, 1, PreemptAny), workloads: oneOfEight,
			want: []string{"preempted:a1<b1", "admitted:b1"}},
		"LessThanOrEqualToFinalShare alone takes a2 (equal shares)": {cluster: fairPool(1, 1, PreemptAny, LessThanOrEqualToFinalShare), workloads: twoOfFour,
			want: []string{"preempted:a2<b1", "admitted:b1"}},
		"LessThanOrEqualToFinalShare alone: b1 waits": {cluster: fairPool(1, 1, PreemptAny, LessThanOrEqualToFinalShare), workloads: oneOfEight},
		"reclaimWithinCohort Never: no preemption":    {cluster: fairPool(1, 1, ""), workloads: twoOfFour},
	})
}
