package k8sbridge_test

import (
	"context"
	"fmt"
	"github.com/gpubot/gpubot/k8sbridge"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"slices"
	"strings"

	"testing"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/k8sbridge/k8senv"
)

func TestAdmitWithinQuota(t *testing.T) {
	s := newScenario(t, map[string]int{"h100": 2}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 16}}})
	b := s.start()
	w := s.workload("r1", "nlp", 8, 200)
	if _, err := b.Apply(s.ctx, commands.Op{Kind: commands.OpSubmit, Workload: w}); err != nil {
		t.Fatal(err)
	}
	ev := s.waitEvent(allocator.EventAdmitted, "r1")
	if ev.Admission == nil || ev.Admission.Flavor != s.n("h100") {
		t.Fatalf("admitted on %+v, want flavor %s", ev.Admission, s.n("h100"))
	}
	snap, err := b.Snapshot(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := snap.Workload("r1")
	if !ok || got.Admission == nil || got.GPUs != 8 {
		t.Fatalf("snapshot has r1 = %+v, %v; want admitted with 8 GPUs", got, ok)
	}
	// Submitting again is harmless: still one Job.
	if _, err := b.Apply(s.ctx, commands.Op{Kind: commands.OpSubmit, Workload: w}); err != nil {
		t.Fatal(err)
	}
	if n := len(s.jobsOf("r1")); n != 1 {
		t.Fatalf("%d Jobs for r1, want 1", n)
	}
}

func (s *scenario) apply(op commands.Op) {
	s.t.Helper()
	if _, err := s.bridge.Apply(s.ctx, op); err != nil {
		s.t.Fatalf("%s %s: %v", op.Kind, op.ID+op.Workload.ID, err)
	}
}

func (s *scenario) submit(w allocator.Workload) {
	s.t.Helper()
	s.apply(commands.Op{Kind: commands.OpSubmit, Workload: w})
}

// waitPending waits until the bridge's snapshot has id pending (Kueue has
// made its Workload and not admitted it) and returns why it waits.
func (s *scenario) waitPending(id string) allocator.Reason {
	s.t.Helper()
	var reason allocator.Reason
	s.eventually(id+" pending in the snapshot", func() bool {
		snap, err := s.bridge.Snapshot(s.ctx)
		if err != nil {
			return false
		}
		w, ok := snap.Workload(id)
		if !ok || w.Admission != nil || len(s.jobsOf(id)) == 0 {
			return false
		}
		reason = snap.Diagnose(id)
		return true
	})
	return reason
}

func TestQueueWhenFullThenAdmitWhenCapacityFrees(t *testing.T) {
	s := newScenario(t, map[string]int{"h100": 1}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 8}}})
	s.start()
	s.submit(s.workload("r1", "nlp", 8, 200))
	s.waitEvent(allocator.EventAdmitted, "r1")
	s.submit(s.workload("r2", "nlp", 8, 200))
	if why := s.waitPending("r2"); why != allocator.ReasonQuota {
		t.Errorf("r2 waits for %q, want quota", why)
	}
	if s.hasEvent(allocator.EventAdmitted, "r2") {
		t.Fatal("r2 admitted while the quota is used by r1")
	}
	s.apply(commands.Op{Kind: commands.OpRemove, ID: "r1"})
	s.waitEvent(allocator.EventAdmitted, "r2")
	s.eventually("r1's Job gone", func() bool { return len(s.jobsOf("r1")) == 0 })
	// Removing again is harmless.
	s.apply(commands.Op{Kind: commands.OpRemove, ID: "r1"})
}

func TestBorrowingInCohort(t *testing.T) {
	s := newScenario(t, map[string]int{"h100": 2},
		teamSpec{name: "nlp", cohort: "research", quotas: []flavorQuota{{flavor: "h100", nominal: 8}}},
		teamSpec{name: "vision", cohort: "research", quotas: []flavorQuota{{flavor: "h100", nominal: 8}}})
	s.start()
	snap, err := s.bridge.Snapshot(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := s.workload("r1", "nlp", 16, 200)
	if _, why := snap.Fit(w); why != allocator.ReasonNone {
		t.Fatalf("allocator predicts r1 waits for %s; want it to borrow and fit", why)
	}
	s.submit(w)
	ev := s.waitEvent(allocator.EventAdmitted, "r1")
	if ev.Admission.Flavor != s.n("h100") {
		t.Fatalf("admitted on %s", ev.Admission.Flavor)
	}
	// vision's nominal quota is lent out: its request waits for the cohort.
	s.submit(s.workload("r2", "vision", 8, 200))
	if why := s.waitPending("r2"); why != allocator.ReasonCohort {
		t.Errorf("r2 waits for %q, want cohort", why)
	}
}

func TestPriorityPreemption(t *testing.T) {
	s := newScenario(t, map[string]int{"h100": 1}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 8}},
		preemption: &kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerPriority}})
	s.start()
	s.submit(s.workload("r1", "nlp", 8, 100))
	s.waitEvent(allocator.EventAdmitted, "r1")
	s.submit(s.workload("r2", "nlp", 8, 500))
	ev := s.waitEvent(allocator.EventPreempted, "r1")
	if ev.By != "r2" {
		t.Errorf("r1 preempted by %q, want r2", ev.By)
	}
	s.waitEvent(allocator.EventAdmitted, "r2")
}

func TestRequeueViaSpecActive(t *testing.T) {
	s := newScenario(t, map[string]int{"h100": 1}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 8}}})
	s.start()
	s.submit(s.workload("r1", "nlp", 8, 200))
	s.waitEvent(allocator.EventAdmitted, "r1")
	s.submit(s.workload("r2", "nlp", 8, 200))
	s.waitPending("r2")
	s.apply(commands.Op{Kind: commands.OpPreempt, ID: "r2", Victims: []string{"r1"}})
	if ev := s.waitEvent(allocator.EventPreempted, "r1"); ev.By != "r2" {
		t.Errorf("r1 preempted by %q, want r2", ev.By)
	}
	s.waitEvent(allocator.EventAdmitted, "r2")
	// r1 is active again and queued behind r2.
	s.waitPending("r1")
	for _, j := range s.jobsOf("r1") {
		wls, _ := s.kueue.KueueV1beta2().Workloads(j.Namespace).List(s.ctx, metav1.ListOptions{})
		for _, wl := range wls.Items {
			if wl.Spec.Active != nil && !*wl.Spec.Active {
				t.Errorf("workload %s still inactive", wl.Name)
			}
		}
	}
}

// fakeNodes creates kwok-managed GPU nodes of flavor f named
// <prefix>-<f>-r<rack>-n<node>, ready and with 8 GPUs each.
func (s *scenario) fakeNodes(f string, racks, perRack int) {
	s.t.Helper()
	for r := 1; r <= racks; r++ {
		for n := 1; n <= perRack; n++ {
			name := fmt.Sprintf("%s-r%d-n%d", s.n(f), r, n)
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
				Labels: map[string]string{"gpubot.io/flavor": s.n(f), "kubernetes.io/hostname": name,
					"cloud.google.com/gce-topology-block": s.n(f) + "-b1", "cloud.google.com/gce-topology-subblock": fmt.Sprintf("%s-r%d", s.n(f), r),
					"type": "kwok"}}}
			if _, err := s.kube.CoreV1().Nodes().Create(s.ctx, node, metav1.CreateOptions{}); err != nil {
				s.t.Fatal(err)
			}
			alloc := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), "cpu": resource.MustParse("32"),
				"memory": resource.MustParse("256Gi"), "pods": resource.MustParse("110")}
			// kwok updates new nodes at once too: retry on conflicts.
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				got, err := s.kube.CoreV1().Nodes().Get(s.ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				got.Status.Capacity, got.Status.Allocatable = alloc, alloc
				_, err = s.kube.CoreV1().Nodes().UpdateStatus(s.ctx, got, metav1.UpdateOptions{})
				return err
			})
			if err != nil {
				s.t.Fatal(err)
			}
			s.t.Cleanup(func() { _ = s.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		}
	}
	// Kueue's topology-aware scheduling ignores nodes until they are
	// ready and untainted.
	if err := k8senv.WaitNodesReady(s.ctx, s.kube, racks*perRack); err != nil {
		s.t.Fatal(err)
	}
}

// topologyFlavor makes flavor f topology-aware (block, rack, host).
func (s *scenario) topologyFlavor(f string) {
	s.t.Helper()
	topo := &kueue.Topology{ObjectMeta: metav1.ObjectMeta{Name: s.n("topology")}, Spec: kueue.TopologySpec{Levels: []kueue.TopologyLevel{
		{NodeLabel: "cloud.google.com/gce-topology-block"}, {NodeLabel: "cloud.google.com/gce-topology-subblock"}, {NodeLabel: "kubernetes.io/hostname"}}}}
	s.must(s.kueue.KueueV1beta2().Topologies().Create(s.ctx, topo, metav1.CreateOptions{}))
	rf, err := s.kueue.KueueV1beta2().ResourceFlavors().Get(s.ctx, s.n(f), metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	rf.Spec.TopologyName = ptr.To(kueue.TopologyReference(topo.Name))
	s.must(s.kueue.KueueV1beta2().ResourceFlavors().Update(s.ctx, rf, metav1.UpdateOptions{}))
}

// TestTopologyRackPodsRunToCompletionOnKwok runs a 16-GPU request that
// must fit in one rack: Kueue's Topology Aware Scheduling accepts the
// annotation and assigns two nodes of one rack, kube-scheduler binds the
// pods there, kwok runs them to completion, and the bridge reports the
// admission (with those nodes) and the end.
func TestTopologyRackPodsRunToCompletionOnKwok(t *testing.T) {
	s := newScenario(t, map[string]int{"h100": 0}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 32}}})
	s.fakeNodes("h100", 2, 2)
	s.topologyFlavor("h100")
	b := s.start()
	s.eventually("the bridge to see 4 nodes", func() bool {
		snap, err := b.Snapshot(s.ctx)
		if err != nil {
			return false
		}
		n := 0
		for _, node := range snap.Cluster().Nodes {
			if node.Flavor == s.n("h100") {
				n++
			}
		}
		return n == 4
	})
	w := s.workload("r1", "nlp", 16, 200)
	w.Topology = allocator.LevelRack
	s.submit(w)
	ev := s.waitEvent(allocator.EventAdmitted, "r1")
	if len(ev.Admission.Nodes) != 2 {
		t.Fatalf("admitted on nodes %v, want 2 nodes from Kueue's topology assignment", ev.Admission.Nodes)
	}
	rack := func(n string) string { return n[:strings.LastIndex(n, "-n")] }
	if rack(ev.Admission.Nodes[0]) != rack(ev.Admission.Nodes[1]) {
		t.Errorf("nodes %v are not in one rack", ev.Admission.Nodes)
	}
	jobs := s.jobsOf("r1")
	if got := jobs[0].Spec.Template.Annotations[k8sbridge.AnnotationTASRequired]; got != "cloud.google.com/gce-topology-subblock" {
		t.Errorf("TAS annotation %q", got)
	}
	s.eventually("r1's pods bound to the assigned nodes", func() bool {
		pods, err := s.kube.CoreV1().Pods(jobs[0].Namespace).List(s.ctx, metav1.ListOptions{LabelSelector: k8sbridge.LabelRequest + "=r1"})
		if err != nil || len(pods.Items) != 2 {
			return false
		}
		for _, p := range pods.Items {
			if !slices.Contains(ev.Admission.Nodes, p.Spec.NodeName) {
				return false
			}
		}
		return true
	})
	s.waitEvent(allocator.EventFinished, "r1")
	j, err := s.kube.BatchV1().Jobs(jobs[0].Namespace).Get(s.ctx, jobs[0].Name, metav1.GetOptions{})
	if err != nil || j.Status.Succeeded != 2 {
		t.Fatalf("Job: %v, succeeded %d; want 2 pods succeeded", err, j.Status.Succeeded)
	}
}

// TestMaxExecutionTimeEndsTheRequest: Kueue ends a workload at the
// max-exec-time label gpubot sets from the requested duration, and the
// bridge reports it finished.
func TestMaxExecutionTimeEndsTheRequest(t *testing.T) {
	s := newScenario(t, map[string]int{"h100": 1}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 8}}})
	s.start()
	w := s.workload("r1", "nlp", 8, 200)
	w.Duration = 2 * time.Second
	s.submit(w)
	s.waitEvent(allocator.EventAdmitted, "r1")
	s.waitEvent(allocator.EventFinished, "r1")
	if s.hasEvent(allocator.EventPreempted, "r1") {
		t.Error("the end of the requested time was reported as a preemption")
	}
}
