package k8sbridge_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/allocator"
)

// Fidelity scenarios for what Kueue v0.17 does beyond one cohort level
// of GPU quotas (issue 11): its cycle's order of heads, its flavor
// search's preferences and its rule that preemption needs a request
// within nominal quota, a two-level cohort tree with a cohort's own
// quota, borrowWithinCohort, flavorFungibility, CPU quotas, and Fair
// Sharing (on a second control plane whose Kueue runs with fairSharing
// on). The outcomes are worked out by hand in the comments; the
// allocator's table tests (allocator/kueue*_test.go) cite the Kueue
// functions behind each.

// newFidelityFS is newFidelity on the Fair Sharing control plane.
func newFidelityFS(t *testing.T, flavors []flavorSpec, teams ...teamSpec) *fidelity {
	t.Helper()
	t.Parallel()
	return newFidelityOn(newScenarioOn(t, fairSharingEnv(t), nil), flavors, teams...)
}

// cohortObject creates a Kueue Cohort (with the scenario's prefix) with
// a parent and GPU quotas of its own.
func (s *scenario) cohortObject(name, parent string, quotas ...flavorQuota) {
	s.t.Helper()
	co := &kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: s.n(name)}}
	if parent != "" {
		co.Spec.ParentName = kueue.CohortReference(s.n(parent))
	}
	if len(quotas) > 0 {
		rg := kueue.ResourceGroup{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"}}
		for _, q := range quotas {
			rg.Flavors = append(rg.Flavors, kueue.FlavorQuotas{Name: kueue.ResourceFlavorReference(s.n(q.flavor)),
				Resources: []kueue.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: *resource.NewQuantity(q.nominal, resource.DecimalSI)}}})
		}
		co.Spec.ResourceGroups = []kueue.ResourceGroup{rg}
	}
	s.must(s.kueue.KueueV1beta2().Cohorts().Create(s.ctx, co, metav1.CreateOptions{}))
}

// withCPU gives a ClusterQueue a CPU quota (cores) on every flavor of its
// GPUs' resource group.
func withCPU(cores int64) func(*kueue.ClusterQueueSpec) {
	return func(cq *kueue.ClusterQueueSpec) {
		rg := &cq.ResourceGroups[0]
		rg.CoveredResources = append(rg.CoveredResources, corev1.ResourceCPU)
		for i := range rg.Flavors {
			rg.Flavors[i].Resources = append(rg.Flavors[i].Resources,
				kueue.ResourceQuota{Name: corev1.ResourceCPU, NominalQuota: *resource.NewQuantity(cores, resource.DecimalSI)})
		}
	}
}

func fungibility(ff kueue.FlavorFungibility) func(*kueue.ClusterQueueSpec) {
	return func(cq *kueue.ClusterQueueSpec) { cq.FlavorFungibility = &ff }
}

var a100h100 = []flavorSpec{{name: "a100", racks: 1, perRack: 1}, {name: "h100", racks: 1, perRack: 1}}

// A request above its queue's nominal quota never preempts
// (fitsResourceQuota): a's 12 waits; a's 8, within its nominal 8, takes
// back what b borrows (b2, b's newest) and preempts a's own low.
func TestFidelityPreemptsOnlyWithinNominal(t *testing.T) {
	f := newFidelity(t, []flavorSpec{{name: "h100", racks: 1, perRack: 3}},
		teamSpec{name: "a", cohort: "pool", quotas: []flavorQuota{q("h100", 8)},
			preemption: preempt(kueue.PreemptionPolicyLowerPriority, kueue.PreemptionPolicyAny)},
		teamSpec{name: "b", cohort: "pool", quotas: []flavorQuota{q("h100", 16)}})
	f.run(
		act{submit: f.wl("low", "a", 4, low), want: "low=h100"},
		act{submit: f.wl("b1", "b", 16, normal), want: "b1=h100 low=h100"},
		act{submit: f.wl("b2", "b", 4, normal), want: "b1=h100 b2=h100 low=h100"},
		act{submit: f.wl("big", "a", 12, high), want: "b1=h100 b2=h100 big=pending low=h100"},
		act{submit: f.wl("mid", "a", 8, high), want: "b1=h100 b2=pending big=pending low=pending mid=h100 | preempted b2 low"},
	)
}

// Among flavors that all need preemption, reclaiming from another queue
// (h100, where b borrows a's quota) beats preempting a's own work
// (a100): isPreferred, BorrowingOverPreemption.
func TestFidelityReclaimBeatsPreemptOnAnotherFlavor(t *testing.T) {
	f := newFidelity(t, a100h100,
		teamSpec{name: "a", cohort: "pool", quotas: []flavorQuota{q("a100", 8), q("h100", 8)},
			preemption: preempt(kueue.PreemptionPolicyLowerPriority, kueue.PreemptionPolicyAny)},
		teamSpec{name: "b", cohort: "pool", quotas: []flavorQuota{q("a100", 0), q("h100", 0)}})
	f.run(
		act{submit: f.wl("alow", "a", 8, low), want: "alow=a100"},
		act{submit: f.wl("b1", "b", 8, normal), want: "alow=a100 b1=h100"},
		act{submit: f.wl("x", "a", 8, high), want: "alow=a100 b1=pending x=h100 | preempted b1"},
	)
}

// A two-level cohort tree with a cohort's own quota: a (nominal 0) is in
// research, which has 8 of its own under org; b (8) is in org. a uses
// research's 8, then borrows b's through org; b takes its 8 back from
// a's newest, which then cannot borrow and waits.
func TestFidelityCohortTreeWithQuota(t *testing.T) {
	t.Parallel()
	s := newScenario(t, nil)
	s.cohortObject("org", "")
	s.cohortObject("research", "org", q("h100", 8))
	f := newFidelityOn(s, h100x2,
		teamSpec{name: "a", cohort: "research", quotas: []flavorQuota{q("h100", 0)}},
		teamSpec{name: "b", cohort: "org", quotas: []flavorQuota{q("h100", 8)},
			preemption: preempt(kueue.PreemptionPolicyNever, kueue.PreemptionPolicyAny)})
	f.run(
		act{submit: f.wl("a1", "a", 8, normal), want: "a1=h100"},
		act{submit: f.wl("a2", "a", 8, normal), want: "a1=h100 a2=h100"},
		act{submit: f.wl("b1", "b", 8, normal), want: "a1=h100 a2=pending b1=h100 | preempted a2"},
		act{release: "b1", want: "a1=h100 a2=h100"},
	)
}

// borrowWithinCohort LowerPriority: a's x (6) is above a's nominal 4, so
// only borrowWithinCohort lets it preempt; it takes b2, which borrows 2
// of a's, and then borrows itself. b1, within b's nominal, is safe.
func TestFidelityBorrowWithinCohort(t *testing.T) {
	bwc := preempt(kueue.PreemptionPolicyNever, kueue.PreemptionPolicyLowerPriority)
	bwc.BorrowWithinCohort = &kueue.BorrowWithinCohort{Policy: kueue.BorrowWithinCohortPolicyLowerPriority}
	f := newFidelity(t, h100x1,
		teamSpec{name: "a", cohort: "pool", quotas: []flavorQuota{q("h100", 4)}, preemption: bwc},
		teamSpec{name: "b", cohort: "pool", quotas: []flavorQuota{q("h100", 4)}})
	f.run(
		act{submit: f.wl("b1", "b", 2, low), want: "b1=h100"},
		act{submit: f.wl("b2", "b", 4, low), want: "b1=h100 b2=h100"},
		act{submit: f.wl("x", "a", 6, high), want: "b1=h100 b2=pending x=h100 | preempted b2"},
	)
}

// whenCanBorrow TryNextFlavor: a goes past a100, where it could only
// borrow, to h100, within its nominal quota; d, with Kueue's default
// (MayStopSearch), borrows on a100.
func TestFidelityWhenCanBorrowTryNextFlavor(t *testing.T) {
	f := newFidelity(t, a100h100,
		teamSpec{name: "a", cohort: "pool", quotas: []flavorQuota{q("a100", 0), q("h100", 4)},
			mutate: fungibility(kueue.FlavorFungibility{WhenCanBorrow: kueue.TryNextFlavor, WhenCanPreempt: kueue.TryNextFlavor})},
		teamSpec{name: "b", cohort: "pool", quotas: []flavorQuota{q("a100", 8), q("h100", 0)}},
		teamSpec{name: "d", cohort: "pool", quotas: []flavorQuota{q("a100", 0), q("h100", 4)}})
	f.run(
		act{submit: f.wl("x", "a", 4, normal), want: "x=h100"},
		act{submit: f.wl("y", "d", 4, normal), want: "x=h100 y=a100"},
	)
}

// whenCanPreempt MayStopSearch: c stops at a100, where preempting its
// own clow makes room, although h100 is free; clow, requeued, runs on
// h100.
func TestFidelityWhenCanPreemptMayStopSearch(t *testing.T) {
	f := newFidelity(t, a100h100,
		teamSpec{name: "c", quotas: []flavorQuota{q("a100", 8), q("h100", 8)},
			preemption: preempt(kueue.PreemptionPolicyLowerPriority, kueue.PreemptionPolicyNever),
			mutate:     fungibility(kueue.FlavorFungibility{WhenCanBorrow: kueue.MayStopSearch, WhenCanPreempt: kueue.MayStopSearch})})
	f.run(
		act{submit: f.wl("clow", "c", 8, low), want: "clow=a100"},
		act{submit: f.wl("chigh", "c", 8, high), want: "chigh=a100 clow=h100 | preempted clow"},
	)
	f.wantNotApproximate("c")
}

// A CPU quota next to the GPUs: nlp has 16 GPUs and 48 cores. r2's 8
// GPUs are free, its 32 cores are not (r1 has 32): it waits, while r3's
// 16 cores fit. When r1 ends, r2 runs.
func TestFidelityCPUBound(t *testing.T) {
	f := newFidelity(t, h100x2, teamSpec{name: "nlp", quotas: []flavorQuota{q("h100", 16)}, mutate: withCPU(48)})
	cpu := func(w *allocator.Workload, cores int64) *allocator.Workload { w.CPU = cores * 1000; return w }
	f.run(
		act{submit: cpu(f.wl("r1", "nlp", 8, normal), 32), want: "r1=h100"},
		act{submit: cpu(f.wl("r2", "nlp", 8, normal), 32), want: "r1=h100 r2=pending"},
		act{submit: cpu(f.wl("r3", "nlp", 4, normal), 16), want: "r1=h100 r2=pending r3=h100",
			then: func(f *fidelity) { f.wantBlocker("r2", allocator.ReasonQuota, allocator.ResourceCPU) }},
		act{release: "r1", want: "r2=h100 r3=h100"},
	)
	f.wantNotApproximate("nlp")
}

// Kueue's Fair Sharing orders the heads by dominant resource share: with
// 2 GPUs free, b's b1 (b would borrow 2 of 8: 250) goes before a's older
// a2 (a would borrow all 8: 1000). l lends; a and b have no quota.
func TestFidelityFairSharingOrder(t *testing.T) {
	f := newFidelityFS(t, h100x1,
		teamSpec{name: "l", cohort: "pool", quotas: []flavorQuota{q("h100", 8)}},
		teamSpec{name: "a", cohort: "pool", quotas: []flavorQuota{q("h100", 0)}},
		teamSpec{name: "b", cohort: "pool", quotas: []flavorQuota{q("h100", 0)}})
	f.run(
		act{submit: f.wl("a1", "a", 6, normal), want: "a1=h100"},
		act{submit: f.wl("c1", "l", 2, normal), want: "a1=h100 c1=h100"},
		act{submit: f.wl("a2", "a", 2, normal), want: "a1=h100 a2=pending c1=h100"},
		act{submit: f.wl("b1", "b", 2, normal), want: "a1=h100 a2=pending b1=pending c1=h100"},
		act{release: "c1", want: "a1=h100 a2=pending b1=h100"},
	)
	f.wantNotApproximate("a", "b")
}

// Fair Sharing's preemption (LessThanOrEqualToFinalShare): a borrows all
// 8 GPUs (share 1000); b's b1 (4, share 500 with it) takes a2, a's
// newest, which leaves a at 500 <= 500.
func TestFidelityFairSharingPreemption(t *testing.T) {
	f := newFidelityFS(t, h100x1,
		teamSpec{name: "l", cohort: "pool", quotas: []flavorQuota{q("h100", 8)}},
		teamSpec{name: "a", cohort: "pool", quotas: []flavorQuota{q("h100", 0)}},
		teamSpec{name: "b", cohort: "pool", quotas: []flavorQuota{q("h100", 0)},
			preemption: preempt(kueue.PreemptionPolicyNever, kueue.PreemptionPolicyAny)})
	f.run(
		act{submit: f.wl("a1", "a", 4, normal), want: "a1=h100"},
		act{submit: f.wl("a2", "a", 4, normal), want: "a1=h100 a2=h100"},
		act{submit: f.wl("b1", "b", 4, normal), want: "a1=h100 a2=pending b1=h100 | preempted a2"},
	)
	f.wantNotApproximate("a", "b")
}

// wantNotApproximate checks that the bridge models everything the
// teams' ClusterQueues use: no feature is named as approximate for them.
func (f *fidelity) wantNotApproximate(teams ...string) {
	f.t.Helper()
	rep, err := f.bridge.KueueReport(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, u := range rep.Approximate {
		for _, team := range teams {
			if slices.Contains(u.Queues, team) {
				f.t.Errorf("%s's estimates are approximate for %s: %s", team, u.Feature, u.Detail)
			}
		}
	}
}

// wantBlocker checks what the allocator says a pending workload waits
// for, on the bridge's snapshot.
func (f *fidelity) wantBlocker(id string, reason allocator.Reason, res allocator.Resource) {
	f.t.Helper()
	snap, err := f.bridge.Snapshot(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	if r, got := snap.DiagnoseResource(id); r != reason || got != res {
		f.t.Errorf("%s waits for %s %s, want %s %s", id, r, got, reason, res)
	}
}
