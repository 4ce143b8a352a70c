package k8sbridge_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// The steps that free quota (a release, a deactivation), held still so
// that Kueue's order shows.
//
// When room frees, Kueue (v0.17, BestEffortFIFO) tries the waiting
// workloads of a ClusterQueue one scheduling cycle after the other, in
// its heap's order (pkg/cache/queue/manager.go, heads: one Pop per
// ClusterQueue per cycle). Other scenarios' topology-aware flavors and
// nodes make Kueue move every active ClusterQueue's inadmissible
// workloads back into the heap at any time (pkg/controller/tas/
// resource_flavor.go, Reconcile); if the room frees while such a heap
// is half tried, the first of two waiting workloads has already failed
// and the second is admitted (README, "Known limits"). So a step that
// frees quota with two or more workloads waiting in one LocalQueue stops
// that LocalQueue (stopPolicy Hold) while the quota frees:
//
//   - stopped, the LocalQueue's waiting workloads leave the ClusterQueue
//     altogether, heap and inadmissible ones alike (localqueue_controller.go
//     Update → Manager.DeleteLocalQueue); nothing tries them, whatever
//     retries other scenarios cause; running workloads keep running;
//   - the workload is released or deactivated, and the harness waits
//     until the ClusterQueue's status shows its quota freed
//     (status.flavorsReservation comes from Kueue's cache, the one the
//     scheduler's snapshot is taken from). Started earlier, the queue's
//     work could be tried before the quota frees and then wait with
//     nothing to retry it: Kueue's retry after a deletion goes through
//     the deleted workload's LocalQueue, skipped while it is stopped
//     (Manager.QueueAssociatedInadmissibleWorkloadsAfter);
//   - started again, Kueue lists the LocalQueue's waiting workloads and
//     pushes every one into the heap under the queue manager's lock, then
//     wakes the scheduler (Manager.AddLocalQueue, ClusterQueue.AddFromLocalQueue):
//     the first cycle pops the heap's head, and the heap's order decides.
//
// Stopping the ClusterQueue instead would not do: started again, it is
// active for the scheduler at once (cache), but its inadmissible
// workloads go back into the heap only a second later (UpdateClusterQueue
// → notifyRetryInadmissible, batched by the requeuer), so a heap half
// tried before the stop would be popped first.
//
// Nothing is held when no ClusterQueue has two workloads waiting: Kueue
// moves a cohort's inadmissible workloads back in one go, and a cycle
// pops every ClusterQueue's head together and orders them itself, so a
// retry cannot split them. Workloads waiting in several LocalQueues with
// two of them in one ClusterQueue cannot be held still: the queues would
// start one after the other and the first started would take the room,
// which would be the harness's order, not Kueue's. The harness refuses
// such a step rather than compare an order it decided.

// waiter is a workload that waits in Kueue when a step that frees quota
// starts.
type waiter struct {
	id           string
	localQueue   string // namespace/name
	clusterQueue string
}

// queueToHold is the LocalQueue to stop while a workload's quota frees,
// given the workloads that wait: "" when no ClusterQueue has two of
// them, else the one LocalQueue they all wait in; an error when they
// wait in several LocalQueues and a ClusterQueue has two.
func queueToHold(waiting []waiter) (string, error) {
	perCQ := map[string][]string{}
	lqs := map[string]bool{}
	for _, w := range waiting {
		perCQ[w.clusterQueue] = append(perCQ[w.clusterQueue], w.id)
		lqs[w.localQueue] = true
	}
	crowded := ""
	for _, cq := range slices.Sorted(maps.Keys(perCQ)) {
		if len(perCQ[cq]) > 1 {
			crowded = cq
			break
		}
	}
	switch {
	case crowded == "":
		return "", nil
	case len(lqs) == 1:
		return waiting[0].localQueue, nil
	}
	return "", fmt.Errorf("workloads wait in %d LocalQueues and ClusterQueue %s has %s waiting: "+
		"Kueue may try its second before its first when the room frees, and holding the LocalQueues "+
		"one after the other would decide the order between them; shape the scenario so that the "+
		"waiting work is in one LocalQueue, or at most one workload waits per ClusterQueue",
		len(lqs), crowded, strings.Join(perCQ[crowded], ", "))
}

// freeing carries out free, which frees workload id's quota and waits
// until id has let go of it (released: gone; deactivated: evicted),
// holding the LocalQueue that id's competitors wait in (see above) until
// Kueue shows the quota freed.
func (f *fidelity) freeing(id string, free func()) {
	f.t.Helper()
	lq, cq := "", ""
	if wl := f.workloadOf(id); wl != nil && wl.Status.Admission != nil {
		cq = string(wl.Status.Admission.ClusterQueue)
		var err error
		if lq, err = queueToHold(f.waiters(id)); err != nil {
			f.t.Fatalf("freeing %s's quota: %v", id, err)
		}
	}
	if lq != "" {
		f.t.Logf("%s's quota freed with LocalQueue %s held", id, lq)
		f.setStopPolicy(lq, kueue.Hold)
	}
	free()
	if lq != "" {
		f.eventually("ClusterQueue "+cq+" showing "+id+"'s quota freed", func() bool { return f.reservationShown(cq) })
		f.setStopPolicy(lq, kueue.None)
	}
}

// waiters are the live workloads other than freed that Kueue keeps
// waiting and that could start (not "will not start as it is"), with
// their queues.
func (f *fidelity) waiters(freed string) []waiter {
	f.t.Helper()
	rep, err := f.bridge.KueueReport(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []waiter
	for _, id := range f.live {
		if id == freed || rep.Pending[id].Never {
			continue
		}
		if st := f.kueueState(id); st != "waiting" && st != "unseen" {
			continue
		}
		wl := f.workloadOf(id)
		lq, err := f.kueue.KueueV1beta2().LocalQueues(wl.Namespace).Get(f.ctx, string(wl.Spec.QueueName), metav1.GetOptions{})
		if err != nil {
			f.t.Fatalf("%s's LocalQueue: %v", id, err)
		}
		out = append(out, waiter{id: id, localQueue: wl.Namespace + "/" + lq.Name, clusterQueue: string(lq.Spec.ClusterQueue)})
	}
	return out
}

// setStopPolicy sets LocalQueue lq's (namespace/name) stopPolicy and
// waits until Kueue has acted on it: its Active condition is set by
// Kueue's LocalQueue reconciler, which runs after the update's event
// handler has taken the queue's workloads out of the ClusterQueue (Hold,
// reason "Stopped") or put them all back (None, any other reason).
func (f *fidelity) setStopPolicy(lq string, p kueue.StopPolicy) {
	f.t.Helper()
	ns, name, _ := strings.Cut(lq, "/")
	lqs := f.kueue.KueueV1beta2().LocalQueues(ns)
	patch := fmt.Appendf(nil, `{"spec":{"stopPolicy":%q}}`, p)
	if _, err := lqs.Patch(f.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		f.t.Fatalf("setting LocalQueue %s's stopPolicy to %s: %v", lq, p, err)
	}
	f.eventually("LocalQueue "+lq+" with stopPolicy "+string(p), func() bool {
		got, err := lqs.Get(f.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		c := apimeta.FindStatusCondition(got.Status.Conditions, kueue.LocalQueueActive)
		stopped := c != nil && c.Status == metav1.ConditionFalse && c.Reason == "Stopped" // localqueue_controller.go, StoppedReason
		return c != nil && stopped == (p != kueue.None)
	})
}

// reservationShown reports whether ClusterQueue cq's status shows the
// quota its Workloads hold now, no more (Kueue's cache has let go of the
// released ones).
func (f *fidelity) reservationShown(cq string) bool {
	got, err := f.kueue.KueueV1beta2().ClusterQueues().Get(f.ctx, cq, metav1.GetOptions{})
	if err != nil {
		return false
	}
	wls, err := f.kueue.KueueV1beta2().Workloads("").List(f.ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	held := map[string]int64{}
	for _, wl := range wls.Items {
		adm := wl.Status.Admission
		if adm == nil || string(adm.ClusterQueue) != cq || !apimeta.IsStatusConditionTrue(wl.Status.Conditions, kueue.WorkloadQuotaReserved) {
			continue
		}
		for _, psa := range adm.PodSetAssignments {
			for res, qty := range psa.ResourceUsage {
				held[string(psa.Flavors[res])+"/"+string(res)] += qty.MilliValue()
			}
		}
	}
	shown := map[string]int64{}
	for _, fl := range got.Status.FlavorsReservation {
		for _, r := range fl.Resources {
			if !r.Total.IsZero() {
				shown[string(fl.Name)+"/"+string(r.Name)] = r.Total.MilliValue()
			}
		}
	}
	for k, v := range held {
		if v == 0 {
			delete(held, k)
		}
	}
	return maps.Equal(held, shown)
}

func TestQueueToHold(t *testing.T) {
	w := func(id, lq, cq string) waiter { return waiter{id: id, localQueue: lq, clusterQueue: cq} }
	for name, tc := range map[string]struct {
		waiting []waiter
		want    string
		refused bool
	}{
		"nothing waits":                  {},
		"one waits":                      {waiting: []waiter{w("r1", "ns/nlp", "nlp")}},
		"two in one queue":               {waiting: []waiter{w("r1", "ns/nlp", "nlp"), w("r2", "ns/nlp", "nlp")}, want: "ns/nlp"},
		"one per ClusterQueue of a pool": {waiting: []waiter{w("a2", "a/a", "a"), w("b2", "b/b", "b")}},
		"two in a, one in b": {waiting: []waiter{w("a2", "a/a", "a"), w("a3", "a/a", "a"), w("b2", "b/b", "b")},
			refused: true},
		"two LocalQueues, one ClusterQueue": {waiting: []waiter{w("x1", "x/q", "shared"), w("y1", "y/q", "shared")},
			refused: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := queueToHold(tc.waiting)
			if (err != nil) != tc.refused {
				t.Fatalf("refused: %v, want refused %v", err, tc.refused)
			}
			if got != tc.want {
				t.Errorf("queueToHold = %q, want %q", got, tc.want)
			}
		})
	}
}
