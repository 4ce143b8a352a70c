package k8sbridge_test

import (
	"testing"

	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// The fidelity scenarios (see fidelity_integration_test.go). Flavors are
// racks × nodes of 8 GPUs; priorities low 100, normal 200, high 500.

const (
	low    = 100
	normal = 200
	high   = 500
)

func q(flavor string, nominal int64) flavorQuota {
	return flavorQuota{flavor: flavor, nominal: nominal}
}

func preempt(within, reclaim kueue.PreemptionPolicy) *kueue.ClusterQueuePreemption {
	return &kueue.ClusterQueuePreemption{WithinClusterQueue: within, ReclaimWithinCohort: reclaim}
}

var h100x1 = []flavorSpec{{name: "h100", racks: 1, perRack: 1}}
var h100x2 = []flavorSpec{{name: "h100", racks: 1, perRack: 2}}
var h100x4 = []flavorSpec{{name: "h100", racks: 2, perRack: 2}}

// Admission order within a team: priority, then arrival, as capacity
// frees one request at a time.
func TestFidelityOrderPriorityThenArrival(t *testing.T) {
	f := newFidelity(t, h100x1, teamSpec{name: "nlp", quotas: []flavorQuota{q("h100", 8)}})
	f.run(
		act{submit: f.wl("r0", "nlp", 8, normal), want: "r0=h100"},
		act{submit: f.wl("r1", "nlp", 8, normal), want: "r0=h100 r1=pending"},
		act{submit: f.wl("r2", "nlp", 8, normal), want: "r0=h100 r1=pending r2=pending"},
		act{submit: f.wl("r3", "nlp", 8, high), want: "r0=h100 r1=pending r2=pending r3=pending"},
		act{release: "r0", want: "r1=pending r2=pending r3=h100"},
		act{release: "r3", want: "r1=h100 r2=pending"},
		act{release: "r1", want: "r2=h100"},
	)
}

// Two teams wait to borrow what a third lends: the one that came first
// gets the first room freed, the other the next.
func TestFidelityBorrowersInArrivalOrder(t *testing.T) {
	f := newFidelity(t, h100x4,
		teamSpec{name: "a", cohort: "pool", quotas: []flavorQuota{q("h100", 8)}},
		teamSpec{name: "b", cohort: "pool", quotas: []flavorQuota{q("h100", 8)}},
		teamSpec{name: "c", cohort: "pool", quotas: []flavorQuota{q("h100", 16)}})
	f.run(
		act{submit: f.wl("c1", "c", 8, normal), want: "c1=h100"},
		act{submit: f.wl("c2", "c", 8, normal), want: "c1=h100 c2=h100"},
		act{submit: f.wl("a1", "a", 8, normal), want: "a1=h100 c1=h100 c2=h100"},
		act{submit: f.wl("b1", "b", 8, normal), want: "a1=h100 b1=h100 c1=h100 c2=h100"},
		act{submit: f.wl("a2", "a", 8, normal), want: "a1=h100 a2=pending b1=h100 c1=h100 c2=h100"},
		act{submit: f.wl("b2", "b", 8, normal), want: "a1=h100 a2=pending b1=h100 b2=pending c1=h100 c2=h100"},
		act{release: "c1", want: "a1=h100 a2=h100 b1=h100 b2=pending c2=h100"},
		act{release: "c2", want: "a1=h100 a2=h100 b1=h100 b2=h100"},
	)
}

// Among teams waiting to borrow, higher priority goes first whatever
// the arrival.
func TestFidelityBorrowersByPriority(t *testing.T) {
	f := newFidelity(t, h100x4,
		teamSpec{name: "a", cohort: "pool", quotas: []flavorQuota{q("h100", 8)}},
		teamSpec{name: "b", cohort: "pool", quotas: []flavorQuota{q("h100", 8)}},
		teamSpec{name: "c", cohort: "pool", quotas: []flavorQuota{q("h100", 16)}})
	f.run(
		act{submit: f.wl("c1", "c", 8, normal)},
		act{submit: f.wl("c2", "c", 8, normal)},
		act{submit: f.wl("a1", "a", 8, normal)},
		act{submit: f.wl("b1", "b", 8, normal), want: "a1=h100 b1=h100 c1=h100 c2=h100"},
		act{submit: f.wl("a2", "a", 8, normal)},
		act{submit: f.wl("b2", "b", 8, high), want: "a1=h100 a2=pending b1=h100 b2=pending c1=h100 c2=h100"},
		act{release: "c1", want: "a1=h100 a2=pending b1=h100 b2=h100 c2=h100"},
	)
}

// When room frees that one team can use within its nominal quota and
// another only by borrowing, Kueue's cycle takes the non-borrowing head
// first (scheduler.go, makeClassicalIterator), although the borrower came
// first; so does the allocator.
func TestFidelityNonBorrowingFirst(t *testing.T) {
	f := newFidelity(t, h100x2,
		teamSpec{name: "a", cohort: "pool", quotas: []flavorQuota{q("h100", 8)}},
		teamSpec{name: "b", cohort: "pool", quotas: []flavorQuota{q("h100", 8)}})
	f.run(
		act{submit: f.wl("a1", "a", 8, normal)},
		act{submit: f.wl("b1", "b", 8, normal)},
		act{submit: f.wl("b2", "b", 8, normal), want: "a1=h100 b1=h100 b2=pending"},
		act{submit: f.wl("a2", "a", 8, normal), want: "a1=h100 a2=pending b1=h100 b2=pending"},
		act{release: "a1", want: "a2=h100 b1=h100 b2=pending"},
	)
}

// BestEffortFIFO: a request that does not fit does not hold back a
// smaller one behind it.
func TestFidelityBestEffortFIFO(t *testing.T) {
	f := newFidelity(t, h100x2, teamSpec{name: "nlp", quotas: []flavorQuota{q("h100", 16)}})
	f.run(
		act{submit: f.wl("r1", "nlp", 8, normal), want: "r1=h100"},
		act{submit: f.wl("big", "nlp", 16, normal), want: "big=pending r1=h100"},
		act{submit: f.wl("small", "nlp", 8, normal), want: "big=pending r1=h100 small=h100"},
		act{release: "r1", want: "big=pending small=h100"},
		act{release: "small", want: "big=h100"},
	)
}

// Known limit: StrictFIFO, which the allocator does not model; the
// bridge says so, and the team's estimates are approximate.
func TestFidelityKnownStrictFIFO(t *testing.T) {
	f := newFidelity(t, h100x2, teamSpec{name: "nlp", quotas: []flavorQuota{q("h100", 16)},
		mutate: func(cq *kueue.ClusterQueueSpec) { cq.QueueingStrategy = kueue.StrictFIFO }})
	f.run(
		act{submit: f.wl("r1", "nlp", 8, normal), want: "r1=h100"},
		act{submit: f.wl("big", "nlp", 16, normal), want: "big=pending r1=h100"},
		act{submit: f.wl("small", "nlp", 8, normal), want: "big=pending r1=h100 small=pending", known: "big=pending r1=h100 small=h100"},
	)
	f.wantApproximate("StrictFIFO", "nlp")
}

// A team's flavors are tried in its order: the first while its quota
// lasts, then the next.
func TestFidelityFlavorOrder(t *testing.T) {
	f := newFidelity(t, []flavorSpec{{name: "a100", racks: 1, perRack: 2}, {name: "h100", racks: 1, perRack: 2}},
		teamSpec{name: "nlp", quotas: []flavorQuota{q("a100", 16), q("h100", 16)}})
	f.run(
		act{submit: f.wl("r1", "nlp", 8, normal), want: "r1=a100"},
		act{submit: f.wl("r2", "nlp", 8, normal), want: "r1=a100 r2=a100"},
		act{submit: f.wl("r3", "nlp", 8, normal), want: "r1=a100 r2=a100 r3=h100"},
		act{submit: f.wl("r4", "nlp", 16, normal), want: "r1=a100 r2=a100 r3=h100 r4=pending"},
		act{release: "r1", want: "r2=a100 r3=h100 r4=pending"},
		act{release: "r3", want: "r2=a100 r4=h100"},
	)
}

// A request pinned to a flavor goes there, and waits there rather than
// take another flavor.
func TestFidelityPinnedFlavor(t *testing.T) {
	f := newFidelity(t, []flavorSpec{{name: "a100", racks: 1, perRack: 2}, {name: "h100", racks: 1, perRack: 2}},
		teamSpec{name: "nlp", quotas: []flavorQuota{q("a100", 16), q("h100", 16)}})
	f.run(
		act{submit: f.wl("r1", "nlp", 8, normal, "h100"), want: "r1=h100"},
		act{submit: f.wl("r2", "nlp", 16, normal, "a100"), want: "r1=h100 r2=a100"},
		act{submit: f.wl("r3", "nlp", 8, normal, "a100"), want: "r1=h100 r2=a100 r3=pending"},
		act{submit: f.wl("r4", "nlp", 8, normal), want: "r1=h100 r2=a100 r3=pending r4=h100"},
		act{release: "r2", want: "r1=h100 r3=a100 r4=h100"},
	)
}

// A team borrows up to its borrowingLimit; more waits, and a request
// above nominal + borrowingLimit will not start as it is.
func TestFidelityBorrowingLimit(t *testing.T) {
	f := newFidelity(t, h100x4,
		teamSpec{name: "a", cohort: "pool", quotas: []flavorQuota{{flavor: "h100", nominal: 8, borrowing: ptr.To[int64](8)}}},
		teamSpec{name: "b", cohort: "pool", quotas: []flavorQuota{q("h100", 24)}})
	f.run(
		act{submit: f.wl("a1", "a", 16, normal), want: "a1=h100"},
		act{submit: f.wl("a2", "a", 8, normal), want: "a1=h100 a2=pending"},
		act{submit: f.wl("a3", "a", 24, normal), want: "a1=h100 a2=pending a3=never"},
		act{submit: f.wl("b1", "b", 16, normal), want: "a1=h100 a2=pending a3=never b1=h100"},
		act{release: "a1", want: "a2=h100 a3=never b1=h100"},
	)
}

// A lender keeps what its lendingLimit does not lend: the borrower gets
// at most that, and the lender's guaranteed part stays its own.
func TestFidelityLendingLimit(t *testing.T) {
	f := newFidelity(t, h100x4,
		teamSpec{name: "a", cohort: "pool", quotas: []flavorQuota{q("h100", 8)}},
		teamSpec{name: "b", cohort: "pool", quotas: []flavorQuota{{flavor: "h100", nominal: 24, lending: ptr.To[int64](8)}}})
	f.run(
		act{submit: f.wl("a1", "a", 16, normal), want: "a1=h100"},
		act{submit: f.wl("a2", "a", 8, normal), want: "a1=h100 a2=pending"},
		act{submit: f.wl("a3", "a", 24, normal), want: "a1=h100 a2=pending a3=never"},
		act{submit: f.wl("b1", "b", 16, normal), want: "a1=h100 a2=pending a3=never b1=h100"},
		act{submit: f.wl("b2", "b", 8, normal), want: "a1=h100 a2=pending a3=never b1=h100 b2=pending"},
	)
}

// reclaimWithinCohort Any: a team below its nominal quota takes it back
// from a team that borrows it.
func TestFidelityReclaimWithinCohort(t *testing.T) {
	f := newFidelity(t, h100x2,
		teamSpec{name: "a", cohort: "pool", quotas: []flavorQuota{q("h100", 8)}},
		teamSpec{name: "b", cohort: "pool", quotas: []flavorQuota{q("h100", 8)}, preemption: preempt(kueue.PreemptionPolicyNever, kueue.PreemptionPolicyAny)})
	f.run(
		act{submit: f.wl("a1", "a", 16, normal), want: "a1=h100"},
		act{submit: f.wl("b1", "b", 8, normal), want: "a1=pending b1=h100 | preempted a1"},
		act{release: "b1", want: "a1=h100"},
	)
}

// reclaimWithinCohort LowerPriority: only the borrower's lower-priority
// work is taken back.
func TestFidelityReclaimLowerPriority(t *testing.T) {
	f := newFidelity(t, h100x2,
		teamSpec{name: "a", cohort: "pool", quotas: []flavorQuota{q("h100", 8)}},
		teamSpec{name: "b", cohort: "pool", quotas: []flavorQuota{q("h100", 8)}, preemption: preempt(kueue.PreemptionPolicyNever, kueue.PreemptionPolicyLowerPriority)})
	f.run(
		act{submit: f.wl("a1", "a", 8, high), want: "a1=h100"},
		act{submit: f.wl("a2", "a", 8, low), want: "a1=h100 a2=h100"},
		act{submit: f.wl("b1", "b", 8, normal), want: "a1=h100 a2=pending b1=h100 | preempted a2"},
		act{submit: f.wl("b2", "b", 8, normal), want: "a1=h100 a2=pending b1=h100 b2=pending"},
	)
}

// reclaimWithinCohort Never: the lender waits until the borrower ends.
func TestFidelityReclaimNever(t *testing.T) {
	f := newFidelity(t, h100x2,
		teamSpec{name: "a", cohort: "pool", quotas: []flavorQuota{q("h100", 8)}},
		teamSpec{name: "b", cohort: "pool", quotas: []flavorQuota{q("h100", 8)}})
	f.run(
		act{submit: f.wl("a1", "a", 16, normal), want: "a1=h100"},
		act{submit: f.wl("b1", "b", 8, normal), want: "a1=h100 b1=pending"},
		act{release: "a1", want: "b1=h100"},
	)
}

// withinClusterQueue LowerPriority: higher-priority work preempts the
// team's lower-priority work, and only lower.
func TestFidelityPriorityPreemption(t *testing.T) {
	f := newFidelity(t, h100x1, teamSpec{name: "nlp", quotas: []flavorQuota{q("h100", 8)}, preemption: preempt(kueue.PreemptionPolicyLowerPriority, "")})
	f.run(
		act{submit: f.wl("low1", "nlp", 8, low), want: "low1=h100"},
		act{submit: f.wl("high1", "nlp", 8, high), want: "high1=h100 low1=pending | preempted low1"},
		act{submit: f.wl("normal1", "nlp", 8, normal), want: "high1=h100 low1=pending normal1=pending"},
		act{submit: f.wl("high2", "nlp", 8, high), want: "high1=h100 high2=pending low1=pending normal1=pending"},
		act{release: "high1", want: "high2=h100 low1=pending normal1=pending"},
	)
}

// withinClusterQueue Never: priority orders the queue but preempts
// nothing.
func TestFidelityNoPreemptionWhenNever(t *testing.T) {
	f := newFidelity(t, h100x1, teamSpec{name: "nlp", quotas: []flavorQuota{q("h100", 8)}})
	f.run(
		act{submit: f.wl("low1", "nlp", 8, low), want: "low1=h100"},
		act{submit: f.wl("high1", "nlp", 8, high), want: "high1=pending low1=h100"},
		act{release: "low1", want: "high1=h100"},
	)
}

// Preemption takes the lowest-priority work, and no more than needed.
func TestFidelityPreemptsTheLowestPriority(t *testing.T) {
	f := newFidelity(t, h100x2, teamSpec{name: "nlp", quotas: []flavorQuota{q("h100", 16)}, preemption: preempt(kueue.PreemptionPolicyLowerPriority, "")})
	f.run(
		act{submit: f.wl("low", "nlp", 8, low)},
		act{submit: f.wl("normal", "nlp", 8, normal), want: "low=h100 normal=h100"},
		act{submit: f.wl("high", "nlp", 8, high), want: "high=h100 low=pending normal=h100 | preempted low"},
	)
}

// A deactivated request leaves room for the next; activated again, it
// queues with its creation time, and LowerOrNewerEqualPriority lets it
// preempt the newer request of equal priority that took its place.
func TestFidelityReactivatedPreemptsNewerEqualPriority(t *testing.T) {
	f := newFidelity(t, h100x1, teamSpec{name: "nlp", quotas: []flavorQuota{q("h100", 8)},
		preemption: preempt(kueue.PreemptionPolicyLowerOrNewerEqualPriority, "")})
	f.run(
		act{submit: f.wl("r1", "nlp", 8, normal), want: "r1=h100"},
		act{submit: f.wl("r2", "nlp", 8, normal), want: "r1=h100 r2=pending"},
		act{deactivate: "r1", want: "r1=inactive r2=h100"},
		act{activate: "r1", want: "r1=h100 r2=pending | preempted r2"},
	)
}

// A deactivated and reactivated request keeps its place in the queue:
// it goes before requests that came after it (Kueue orders it by its
// creation time, workload.Ordering.GetQueueOrderTimestamp).
func TestFidelityReactivatedKeepsItsPlace(t *testing.T) {
	f := newFidelity(t, h100x1, teamSpec{name: "nlp", quotas: []flavorQuota{q("h100", 8)}})
	f.run(
		act{submit: f.wl("r1", "nlp", 8, normal)},
		act{submit: f.wl("r2", "nlp", 8, normal)},
		act{submit: f.wl("r3", "nlp", 8, normal), want: "r1=h100 r2=pending r3=pending"},
		act{deactivate: "r1", want: "r1=inactive r2=h100 r3=pending"},
		act{activate: "r1", want: "r1=pending r2=h100 r3=pending"},
		act{release: "r2", want: "r1=h100 r3=pending"},
	)
}

// Topology Aware Scheduling, host: all pods on one node, as long as a
// node has the room.
func TestFidelityHostTopology(t *testing.T) {
	f := newFidelity(t, h100x2, teamSpec{name: "nlp", quotas: []flavorQuota{q("h100", 16)}})
	f.run(
		act{submit: f.wl("r1", "nlp", 4, normal, "host"), want: "r1=h100"},
		act{submit: f.wl("r2", "nlp", 8, normal, "host"), want: "r1=h100 r2=h100"},
		act{submit: f.wl("r3", "nlp", 4, normal, "host"), want: "r1=h100 r2=h100 r3=h100"},
		act{submit: f.wl("r4", "nlp", 4, normal, "host"), want: "r1=h100 r2=h100 r3=h100 r4=pending"},
		act{release: "r2", want: "r1=h100 r3=h100 r4=h100"},
	)
}

// Topology Aware Scheduling, rack: a request that fits in one rack, one
// that waits for a rack to free, and one no rack can ever hold.
func TestFidelityRackTopology(t *testing.T) {
	f := newFidelity(t, h100x4, teamSpec{name: "nlp", quotas: []flavorQuota{q("h100", 32)}})
	f.run(
		act{submit: f.wl("r1", "nlp", 8, normal), want: "r1=h100"},
		act{submit: f.wl("r2", "nlp", 16, normal, "rack"), want: "r1=h100 r2=h100"},
		act{submit: f.wl("r3", "nlp", 16, normal, "rack"), want: "r1=h100 r2=h100 r3=pending"},
		act{submit: f.wl("r4", "nlp", 32, normal, "rack"), want: "r1=h100 r2=h100 r3=pending r4=never"},
		act{release: "r1", want: "r2=h100 r3=h100 r4=never"},
	)
}

// Will not start as it is: more GPUs in one host than a node has, more
// than the cluster has, more than the quota even with borrowing.
func TestFidelityCannotStartAsItIs(t *testing.T) {
	f := newFidelity(t, h100x2,
		teamSpec{name: "nlp", cohort: "pool", quotas: []flavorQuota{{flavor: "h100", nominal: 8, borrowing: ptr.To[int64](8)}}},
		teamSpec{name: "vision", cohort: "pool", quotas: []flavorQuota{q("h100", 8)}})
	f.run(
		act{submit: f.wl("host16", "vision", 16, normal, "host"), want: "host16=never"},
		act{submit: f.wl("over", "nlp", 24, normal), want: "host16=never over=never"},
		act{submit: f.wl("block", "vision", 4, normal, "block"), want: "block=h100 host16=never over=never"},
		act{submit: f.wl("ok", "nlp", 8, normal), want: "block=h100 host16=never ok=h100 over=never"},
	)
}

// Fragmentation: enough free GPUs in all, none with room for the pod.
func TestFidelityFragmentation(t *testing.T) {
	f := newFidelity(t, h100x2, teamSpec{name: "nlp", quotas: []flavorQuota{q("h100", 16)}})
	f.run(
		act{submit: f.wl("r1", "nlp", 6, normal), want: "r1=h100"},
		act{submit: f.wl("r2", "nlp", 6, normal), want: "r1=h100 r2=h100"},
		act{submit: f.wl("r3", "nlp", 4, normal), want: "r1=h100 r2=h100 r3=pending"},
		act{release: "r1", want: "r2=h100 r3=h100"},
	)
}

// A flavor with quota and no nodes: work goes to the team's next flavor;
// pinned to it, it will not start as it is, until nodes come.
func TestFidelityFlavorWithNoNodes(t *testing.T) {
	f := newFidelity(t, []flavorSpec{{name: "empty"}, {name: "h100", racks: 1, perRack: 1}},
		teamSpec{name: "nlp", quotas: []flavorQuota{q("empty", 16), q("h100", 8)}})
	f.run(
		act{submit: f.wl("r1", "nlp", 8, normal), want: "r1=h100"},
		act{submit: f.wl("r2", "nlp", 8, normal, "empty"), want: "r1=h100 r2=never"},
		act{then: func(f *fidelity) { f.wantFlavorNodes("empty", 0); f.addNodes("empty", 1, 1, 2) }, want: "r1=h100 r2=empty"},
	)
}

// Known limit: a flavor without a Kueue Topology is admitted by quota
// alone, nodes or not (the pods then wait for nodes, which an autoscaler
// may add); the allocator also needs free GPUs on nodes. The bridge says
// so, and the team's estimates are approximate.
func TestFidelityKnownQuotaOnlyFlavorWithoutNodes(t *testing.T) {
	f := newFidelity(t, []flavorSpec{{name: "spot", quotaOnly: true}}, teamSpec{name: "nlp", quotas: []flavorQuota{q("spot", 16)}})
	f.run(
		act{submit: f.wl("r1", "nlp", 8, normal), want: "r1=spot", known: "r1=never"},
	)
	f.wantApproximate("quota-only flavor", "nlp")
	f.wantFlavorNodes("spot", 0)
}
