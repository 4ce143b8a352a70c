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

// A release on one flavor changes the dominant shares, which decide
// Fair Sharing's preemption on every flavor: Kueue requeues every
// inadmissible workload of the cohort on a release
// (QueueInadmissibleWorkloads), and here too every class is tried again,
// not only those on the released flavor. Flavors f1 and f2 of 8 GPUs;
// c lends f1's 8, l f2's 8, so 16 GPUs are lendable in all. b borrows
// all of f1 (b1: share 8/16 = 500) and a all of f2 (a1, a2: 500). In
// the first cycle b2 (b, 4 on f2) would leave b at 750: neither
// strategy lets it preempt a (750 > 250 after a2; 750 >= 500), so it
// waits; c1 (c, 8 on f1, within nominal) reclaims b1. With b back at 0,
// b2 would leave b at 250 <= a's 250 without a2: LessThanOrEqual-
// ToFinalShare takes a2 (a's newest) for b2. b1 (pinned to f1, where c
// is within nominal) waits.
func TestKueueFairSharingReleaseElsewhere(t *testing.T) {
	cl := flavorsF1F2(
		MakeQueue("c").Cohort("pool").Quota("f1", 8).Quota("f2", 0).Preempt("", PreemptAny),
		MakeQueue("l").Cohort("pool").Quota("f1", 0).Quota("f2", 8),
		MakeQueue("a").Cohort("pool").Quota("f1", 0).Quota("f2", 0),
		MakeQueue("b").Cohort("pool").Quota("f1", 0).Quota("f2", 0).Preempt("", PreemptAny)).
		KueueFairSharing().Obj()
	runKueueCases(t, map[string]kueueCase{
		"b2 preempts once b's share fell on f1": {cluster: cl, workloads: []Workload{
			MakeWorkload("b1").Queue("b").GPUs(8).Flavor("f1").Admitted("f1", 0, "f1-00").Obj(),
			MakeWorkload("a1").Queue("a").GPUs(4).Admitted("f2", time.Hour, "f2-00").Obj(),
			MakeWorkload("a2").Queue("a").GPUs(4).Admitted("f2", 2*time.Hour, "f2-00").Obj(),
			MakeWorkload("b2").Queue("b").GPUs(4).Flavor("f2").Created(time.Minute).Obj(),
			MakeWorkload("c1").Queue("c").GPUs(8).Flavor("f1").Created(time.Minute).Obj(),
		}, want: []string{"preempted:b1<c1", "admitted:c1", "preempted:a2<b2", "admitted:b2"}},
	})
}
