package k8sbridge_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// Fidelity: the same steps go through gpubot's allocator (on the bridge's
// snapshot of the real cluster) and through the real Kueue controller,
// and the outcomes must agree: for every workload of the scenario, the
// flavor it is admitted on, or that it waits, or that it will not start
// as it is; and which workloads were preempted. Each step also states
// the outcome worked out by hand, so that a scenario cannot pass by both
// being wrong the same way. A step marked known is a documented
// difference (README, "Known limits"): it must differ exactly so.
//
// Scenarios run in parallel, each with its own flavors (topology-aware,
// on kwok nodes), ClusterQueues and namespaces on the shared control
// plane.

// fidelityTopology is the Kueue Topology of every fidelity flavor.
const fidelityTopology = "gpubot-fidelity"

// flavorSpec is one flavor of a fidelity scenario: racks × perRack nodes
// of 8 GPUs (none for 0), topology-aware unless quotaOnly.
type flavorSpec struct {
	name           string
	racks, perRack int
	quotaOnly      bool
}

type fidelity struct {
	*scenario
	live    []string // workloads submitted and not released
	pending map[string]allocator.Workload
}

// newFidelity starts a scenario with its flavors, teams and bridge.
func newFidelity(t *testing.T, flavors []flavorSpec, teams ...teamSpec) *fidelity {
	t.Helper()
	t.Parallel()
	return newFidelityOn(newScenario(t, nil), flavors, teams...)
}

func newFidelityOn(s *scenario, flavors []flavorSpec, teams ...teamSpec) *fidelity {
	s.t.Helper()
	for _, f := range flavors {
		rf := &kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: s.n(f.name)},
			Spec: kueue.ResourceFlavorSpec{NodeLabels: map[string]string{"gpubot.io/flavor": s.n(f.name)}}}
		if !f.quotaOnly {
			rf.Spec.TopologyName = ptr.To(kueue.TopologyReference(fidelityTopology))
		}
		s.must(s.kueue.KueueV1beta2().ResourceFlavors().Create(s.ctx, rf, metav1.CreateOptions{}))
		s.t.Cleanup(func() {
			_ = s.kueue.KueueV1beta2().ResourceFlavors().Delete(context.Background(), rf.Name, metav1.DeleteOptions{})
		})
		s.cfg.Flavors = append(s.cfg.Flavors, allocator.Flavor{Name: s.n(f.name), GPUsPerNode: 8})
		if f.racks > 0 {
			s.fakeNodes(f.name, f.racks, f.perRack)
		}
	}
	for _, tm := range teams {
		s.addTeam(tm)
	}
	s.cfg.Priorities = priorities
	s.cfg.Templates = keepRunning // pods stay running on kwok for the whole test
	s.start()
	f := &fidelity{scenario: s, pending: map[string]allocator.Workload{}}
	nodes := 0
	for _, fl := range flavors {
		nodes += fl.racks * fl.perRack
	}
	f.waitNodes(nodes)
	return f
}

// waitNodes waits until the bridge's snapshot has n nodes of the
// scenario's flavors.
func (f *fidelity) waitNodes(n int) {
	f.t.Helper()
	f.eventually(fmt.Sprintf("%d nodes in the snapshot", n), func() bool {
		snap, err := f.bridge.Snapshot(f.ctx)
		if err != nil {
			return false
		}
		k := 0
		for _, node := range snap.Cluster().Nodes {
			if strings.HasPrefix(node.Flavor, f.p+"-") {
				k++
			}
		}
		return k == n
	})
}

// act is one step: submit a workload, release or requeue one, or change
// the cluster (then); want is Kueue's outcome worked out by hand, known
// (for a documented difference) what the allocator predicts instead.
type act struct {
	submit     *allocator.Workload
	release    string
	deactivate string // spec.active=false: Kueue evicts it and keeps it out
	activate   string // spec.active=true again: it queues with its creation time
	then       func(f *fidelity)
	want       string
	known      string
}

// wl builds a workload: id, team, GPUs, priority; pinned flavor and
// topology optional ("h100", "rack").
func (f *fidelity) wl(id, team string, gpus int, prio int32, opts ...string) *allocator.Workload {
	w := allocator.Workload{ID: id, Queue: team, GPUs: gpus, Priority: prio, Duration: time.Hour}
	for _, o := range opts {
		if l, err := allocator.ParseLevel(o); err == nil && l != allocator.LevelNone {
			w.Topology = l
		} else {
			w.Flavor = f.n(o)
		}
	}
	return &w
}

// run plays the steps, checking each.
func (f *fidelity) run(steps ...act) {
	f.t.Helper()
	for i, st := range steps {
		what := fmt.Sprintf("step %d (%s)", i+1, st.describe())
		if st.then != nil {
			st.then(f)
		}
		if st.submit != nil {
			f.nextSecond()
			st.submit.Created = time.Now()
		}
		predicted := f.predict(st)
		mark := f.eventCount()
		f.do(st)
		expect := predicted
		if st.known != "" {
			expect = st.want
		}
		observed := f.observe(mark, expect, st.deactivate)
		if st.want != "" && observed != st.want {
			f.t.Errorf("%s: Kueue did %q; the scenario expects %q", what, observed, st.want)
		}
		switch {
		case st.known == "" && predicted != observed:
			f.t.Errorf("%s: allocator predicted %q, Kueue did %q", what, predicted, observed)
			f.dump()
		case st.known != "" && predicted != st.known:
			f.t.Errorf("%s (a known difference): allocator predicted %q; the README documents %q (Kueue did %q)", what, predicted, st.known, observed)
		}
	}
}

func (a act) describe() string {
	switch {
	case a.submit != nil:
		return "submit " + a.submit.ID
	case a.release != "":
		return "release " + a.release
	case a.deactivate != "":
		return "deactivate " + a.deactivate
	case a.activate != "":
		return "activate " + a.activate
	}
	return "cluster change"
}

// predict is what the allocator says the step leads to, on the bridge's
// snapshot: the step, then admission cycles until nothing changes.
func (f *fidelity) predict(st act) string {
	f.t.Helper()
	snap, err := f.bridge.Snapshot(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	// A deactivated request stays in the bridge's snapshot (its request
	// is still gpubot's to follow, see view.go), but Kueue does not queue
	// it: leave it out of the prediction.
	for id := range f.pending {
		if _, ok := snap.Workload(id); ok && id != st.activate {
			if _, err := snap.Release(id); err != nil {
				f.t.Fatal(err)
			}
		}
	}
	live := slices.Clone(f.live)
	preempted := map[string]bool{}
	cycles := func() {
		for range 5 {
			evs := snap.Schedule()
			if len(evs) == 0 {
				return
			}
			for _, e := range evs {
				if e.Kind == allocator.EventPreempted && slices.Contains(live, e.ID) {
					preempted[e.ID] = true // (other scenarios' workloads are in the snapshot too)
				}
			}
		}
	}
	switch {
	case st.submit != nil:
		if _, err := snap.Add(*st.submit); err != nil {
			f.t.Fatal(err)
		}
		live = append(live, st.submit.ID)
	case st.release != "":
		if _, err := snap.Release(st.release); err != nil {
			f.t.Fatal(err)
		}
		live = slices.DeleteFunc(live, func(id string) bool { return id == st.release })
	case st.deactivate != "":
		// Kueue evicts it and keeps it out of the queue.
		w, _ := snap.Workload(st.deactivate)
		w.Admission = nil
		f.pending[st.deactivate] = w
		if _, err := snap.Release(st.deactivate); err != nil {
			f.t.Fatal(err)
		}
	case st.activate != "":
		// It queues again with its creation time.
		if _, ok := snap.Workload(st.activate); !ok {
			if _, err := snap.Add(f.pending[st.activate]); err != nil {
				f.t.Fatal(err)
			}
		}
	}
	cycles()
	states := map[string]string{}
	for _, id := range live {
		w, ok := snap.Workload(id)
		switch {
		case !ok && f.inactive(id, st):
			states[id] = "inactive"
		case !ok:
			states[id] = "gone"
		case w.Admission != nil:
			states[id] = f.short(w.Admission.Flavor)
		case f.neverOnEmpty(snap, w):
			states[id] = "never"
		default:
			states[id] = "pending"
		}
	}
	return outcome(states, preempted)
}

// inactive reports whether id is deactivated after step st.
func (f *fidelity) inactive(id string, st act) bool {
	if st.activate == id {
		return false
	}
	_, ok := f.pending[id]
	return ok
}

// neverOnEmpty is the allocator's "will not start as it is": w does not
// fit even with nothing else in the cluster.
func (f *fidelity) neverOnEmpty(snap *allocator.Snapshot, w allocator.Workload) bool {
	empty, err := allocator.NewSnapshot(snap.Cluster(), snap.Now(), nil, nil)
	if err != nil {
		f.t.Fatal(err)
	}
	w.Admission = nil
	_, reason := empty.Fit(w)
	return reason != allocator.ReasonNone
}

func (f *fidelity) short(flavor string) string { return strings.TrimPrefix(flavor, f.p+"-") }

func outcome(states map[string]string, preempted map[string]bool) string {
	ids := make([]string, 0, len(states))
	for id := range states {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id + "=" + states[id]
	}
	out := strings.Join(parts, " ")
	if len(preempted) > 0 {
		var ps []string
		for id := range preempted {
			ps = append(ps, id)
		}
		slices.Sort(ps)
		out += " | preempted " + strings.Join(ps, " ")
	}
	return out
}

// do carries the step out on the cluster through the bridge.
func (f *fidelity) do(st act) {
	f.t.Helper()
	switch {
	case st.submit != nil:
		f.submit(*st.submit)
		f.live = append(f.live, st.submit.ID)
	case st.release != "":
		f.apply(commands.Op{Kind: commands.OpRemove, ID: st.release})
		f.live = slices.DeleteFunc(f.live, func(id string) bool { return id == st.release })
		f.eventually(st.release+"'s Job and Workload gone", func() bool { return f.kueueState(st.release) == "gone" })
	case st.deactivate != "":
		f.setActive(st.deactivate, false)
	case st.activate != "":
		f.setActive(st.activate, true)
		delete(f.pending, st.activate)
	}
}

func (f *fidelity) setActive(id string, active bool) {
	f.t.Helper()
	wl := f.workloadOf(id)
	if wl == nil {
		f.t.Fatalf("%s has no Workload", id)
	}
	patch := fmt.Appendf(nil, `{"spec":{"active":%t}}`, active)
	if _, err := f.kueue.KueueV1beta2().Workloads(wl.Namespace).Patch(f.ctx, wl.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// observe waits until Kueue has settled (every workload decided, no
// preemption under way, the bridge caught up, nothing changed for a
// while) and returns what Kueue did, with the preemptions of the
// scenario's workloads reported since event mark (a deactivation is not
// one). Under load Kueue may take a few seconds to readmit work after an
// eviction: while its outcome differs from expect it is given longer to
// settle (expect never changes what is observed, only how long).
func (f *fidelity) observe(mark int, expect, deactivated string) string {
	f.t.Helper()
	var last string
	stableSince := time.Now()
	err := wait.PollUntilContextTimeout(f.ctx, 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		states := map[string]string{}
		for _, id := range f.live {
			states[id] = f.kueueState(id)
		}
		cur := outcome(states, nil)
		if cur != last {
			last, stableSince = cur, time.Now()
			return false, nil
		}
		quiet := time.Since(stableSince)
		for _, st := range states {
			// A workload Kueue has not looked at (behind a StrictFIFO
			// head, in a stopped queue) is settled after a quiet while.
			if st == "deciding" || st == "gone" || (st == "unseen" && quiet < 4*time.Second) {
				return false, nil
			}
		}
		if quiet < 1500*time.Millisecond || !f.bridgeAgrees(states) {
			return false, nil
		}
		return quiet > 10*time.Second || f.outcome(mark, deactivated) == expect, nil
	})
	if err != nil {
		f.t.Fatalf("waiting for Kueue to settle (last %q): %v", last, err)
	}
	return f.outcome(mark, deactivated)
}

// outcome is what Kueue did: each workload's state (pending ones that
// Kueue cannot admit as they are, per the bridge's reading of Kueue's
// word, "never"), and the preemptions since event mark.
func (f *fidelity) outcome(mark int, deactivated string) string {
	f.t.Helper()
	rep, err := f.bridge.KueueReport(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	states := map[string]string{}
	for _, id := range f.live {
		st := f.kueueState(id)
		if st == "waiting" || st == "unseen" {
			st = "pending"
			if rep.Pending[id].Never {
				st = "never"
			}
		}
		states[id] = st
	}
	preempted := map[string]bool{}
	f.mu.Lock()
	for _, e := range f.events[mark:] {
		if e.Kind == allocator.EventPreempted && slices.Contains(f.live, e.ID) && e.ID != deactivated {
			preempted[e.ID] = true
		}
	}
	f.mu.Unlock()
	return outcome(states, preempted)
}

// kueueState is what Kueue says of id now: the flavor it is admitted on,
// "reserved:<flavor>" (quota reserved, admission checks pending),
// "waiting" (decided: no quota reserved), "deciding" (not looked at yet,
// or being evicted, or waiting for its victims, or made active again
// and not queued yet), or "gone".
func (f *fidelity) kueueState(id string) string {
	wl := f.workloadOf(id)
	if wl == nil {
		if len(f.jobsOf(id)) > 0 {
			return "deciding"
		}
		return "gone"
	}
	conds := wl.Status.Conditions
	qr := apimeta.FindStatusCondition(conds, kueue.WorkloadQuotaReserved)
	switch {
	case wl.Spec.Active != nil && !*wl.Spec.Active && (qr == nil || qr.Status == metav1.ConditionFalse):
		return "inactive"
	case reactivating(wl):
		return "deciding"
	case qr == nil:
		return "unseen"
	case qr.Status == metav1.ConditionTrue && apimeta.IsStatusConditionTrue(conds, kueue.WorkloadEvicted):
		return "deciding" // being evicted
	case qr.Status == metav1.ConditionTrue:
		flavor := f.short(string(wl.Status.Admission.PodSetAssignments[0].Flavors["nvidia.com/gpu"]))
		if !apimeta.IsStatusConditionTrue(conds, kueue.WorkloadAdmitted) {
			return "reserved:" + flavor
		}
		return flavor
	case strings.Contains(qr.Message, "Pending the preemption"):
		return "deciding"
	}
	return "waiting"
}

// reactivating reports a Workload made active again that Kueue has not
// yet queued: its eviction left Requeued=False, reason Deactivated (set
// by pkg/controller/jobframework/reconciler.go when it clears the
// deactivated Job's admission), until
// the workload controller's Reconcile sets Requeued=True, reason
// Reactivated (pkg/controller/core/workload_controller.go, "case
// kueue.WorkloadDeactivated"). Until then it is no candidate at all:
// ClusterQueue.backoffWaitingTimeExpired (pkg/cache/queue/cluster_queue.go)
// is false for Requeued=False, so PushOrUpdate keeps it among the
// inadmissible workloads and queueInadmissibleWorkloads
// (inadmissible_workloads.go) leaves it there when room frees; a request
// behind it would take that room. Its QuotaReserved=False from before
// the deactivation would otherwise read as decided.
func reactivating(wl *kueue.Workload) bool {
	rq := apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadRequeued)
	return (wl.Spec.Active == nil || *wl.Spec.Active) && rq != nil &&
		rq.Status == metav1.ConditionFalse && rq.Reason == kueue.WorkloadDeactivated
}

// workloadOf is the newest Workload of request id's Job.
func (f *fidelity) workloadOf(id string) *kueue.Workload {
	var out *kueue.Workload
	for _, j := range f.jobsOf(id) {
		wls, err := f.kueue.KueueV1beta2().Workloads(j.Namespace).List(f.ctx, metav1.ListOptions{})
		if err != nil {
			return nil
		}
		for i := range wls.Items {
			wl := &wls.Items[i]
			if len(wl.OwnerReferences) > 0 && wl.OwnerReferences[0].UID == j.UID &&
				(out == nil || wl.CreationTimestamp.After(out.CreationTimestamp.Time)) {
				out = wl
			}
		}
	}
	return out
}

// bridgeAgrees reports whether the bridge's snapshot shows Kueue's
// states: admitted (or reserved) workloads with an admission on the same
// flavor, waiting ones pending.
func (f *fidelity) bridgeAgrees(states map[string]string) bool {
	snap, err := f.bridge.Snapshot(f.ctx)
	if err != nil {
		return false
	}
	for id, st := range states {
		w, ok := snap.Workload(id)
		if st == "inactive" {
			if ok && w.Admission != nil {
				return false
			}
			continue
		}
		if !ok {
			return false
		}
		admitted := st != "waiting" && st != "unseen"
		if admitted != (w.Admission != nil) {
			return false
		}
		if admitted && f.short(w.Admission.Flavor) != strings.TrimPrefix(st, "reserved:") {
			return false
		}
	}
	return true
}

func (f *fidelity) dump() {
	wls, _ := f.kueue.KueueV1beta2().Workloads("").List(f.ctx, metav1.ListOptions{})
	for _, wl := range wls.Items {
		if strings.HasPrefix(wl.Namespace, f.p+"-") {
			f.t.Logf("%s/%s: %+v", wl.Namespace, wl.Name, wl.Status.Conditions)
		}
	}
}

// addNodes adds racks × perRack kwok nodes to flavor name, waiting
// until the bridge sees them.
func (f *fidelity) addNodes(name string, racks, perRack, total int) {
	f.fakeNodes(name, racks, perRack)
	f.waitNodes(total)
}

// createTopology creates the Topology the fidelity flavors use.
func createTopology(ctx context.Context, kq kueueclient.Interface) error {
	topo := &kueue.Topology{ObjectMeta: metav1.ObjectMeta{Name: fidelityTopology}, Spec: kueue.TopologySpec{Levels: []kueue.TopologyLevel{
		{NodeLabel: "cloud.google.com/gce-topology-block"}, {NodeLabel: "cloud.google.com/gce-topology-subblock"}, {NodeLabel: corev1.LabelHostname}}}}
	_, err := kq.KueueV1beta2().Topologies().Create(ctx, topo, metav1.CreateOptions{})
	return err
}

func (s *scenario) eventCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events)
}

// nextSecond waits for the wall clock to enter a new second: Kueue orders
// equal priorities by creation time, which has one-second resolution.
func (s *scenario) nextSecond() {
	s.t.Helper()
	start := time.Now().Unix()
	s.eventually("the next second", func() bool { return time.Now().Unix() > start })
}
