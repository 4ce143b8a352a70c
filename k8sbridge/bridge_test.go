package k8sbridge_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueuefake "sigs.k8s.io/kueue/client-go/clientset/versioned/fake"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/k8sbridge"
)

// Unit tests: the bridge on client-go's and Kueue's fake clientsets.

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func gpuNode(name, rack string, gpus int64) *corev1.Node {
	alloc := corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"accel": "h100", "kubernetes.io/hostname": name, "rack": rack, "block": "b1"}},
		Status: corev1.NodeStatus{Allocatable: alloc, Capacity: alloc,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
}

func cond(typ string, status metav1.ConditionStatus, at time.Time, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, LastTransitionTime: metav1.NewTime(at), Reason: reason, Message: msg}
}

// fakeWorkload is a Kueue Workload of gpus GPUs in pods of per GPUs.
func fakeWorkload(ns, name string, pods int32, per int64, owner *batchv1.Job) *kueue.Workload {
	req := corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(per, resource.DecimalSI)}
	wl := &kueue.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID("uid-" + name), CreationTimestamp: metav1.NewTime(t0)},
		Spec: kueue.WorkloadSpec{QueueName: "nlp", Priority: ptr.To[int32](200), PodSets: []kueue.PodSet{{Name: "main", Count: pods,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}}}}}}}}
	if owner != nil {
		wl.OwnerReferences = []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
	}
	return wl
}

func admit(wl *kueue.Workload, flavor string, at time.Time, nodes ...string) {
	wl.Status.Conditions = []metav1.Condition{
		cond(kueue.WorkloadQuotaReserved, metav1.ConditionTrue, at, "QuotaReserved", ""),
		cond(kueue.WorkloadAdmitted, metav1.ConditionTrue, at, "Admitted", "")}
	psa := kueue.PodSetAssignment{Name: "main", Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"nvidia.com/gpu": kueue.ResourceFlavorReference(flavor)}}
	if len(nodes) > 0 {
		roots := slices.Compact(slices.Clone(nodes))
		counts := make([]int32, len(roots))
		for _, n := range nodes {
			counts[slices.Index(roots, n)]++
		}
		psa.TopologyAssignment = &kueue.TopologyAssignment{Levels: []string{"kubernetes.io/hostname"}, Slices: []kueue.TopologyAssignmentSlice{{
			DomainCount:    int32(len(roots)),
			ValuesPerLevel: []kueue.TopologyAssignmentSliceLevelValues{{Individual: &kueue.TopologyAssignmentSliceLevelIndividualValues{Roots: roots}}},
			PodCounts:      kueue.TopologyAssignmentSlicePodCounts{Individual: counts}}}}
	}
	wl.Status.Admission = &kueue.Admission{ClusterQueue: "nlp-cq", PodSetAssignments: []kueue.PodSetAssignment{psa}}
}

type fakeCluster struct {
	kube  *kubefake.Clientset
	kueue *kueuefake.Clientset
}

func newFake(kubeObjs []runtime.Object, kueueObjs []runtime.Object) fakeCluster {
	return newFakeWith(kubeObjs, nil, kueueObjs...)
}

// newFakeWith is newFake with the ClusterQueue nlp-cq changed by cq first.
func newFakeWith(kubeObjs []runtime.Object, cq func(*kueue.ClusterQueue), kueueObjs ...runtime.Object) fakeCluster {
	kube := kubefake.NewClientset(kubeObjs...)
	kube.Resources = []*metav1.APIResourceList{{GroupVersion: "kueue.x-k8s.io/v1beta2"}}
	base := []runtime.Object{
		&kueue.ResourceFlavor{ObjectMeta: metav1.ObjectMeta{Name: "h100"}, Spec: kueue.ResourceFlavorSpec{NodeLabels: map[string]string{"accel": "h100"}}},
		&kueue.ClusterQueue{ObjectMeta: metav1.ObjectMeta{Name: "nlp-cq"}, Spec: kueue.ClusterQueueSpec{CohortName: "research",
			Preemption: &kueue.ClusterQueuePreemption{WithinClusterQueue: kueue.PreemptionPolicyLowerPriority},
			ResourceGroups: []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu"}, Flavors: []kueue.FlavorQuotas{{Name: "h100",
				Resources: []kueue.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("16"), BorrowingLimit: ptr.To(resource.MustParse("8"))}}}}}}}},
		&kueue.LocalQueue{ObjectMeta: metav1.ObjectMeta{Name: "nlp", Namespace: "team-nlp"}, Spec: kueue.LocalQueueSpec{ClusterQueue: "nlp-cq"}},
		&kueue.WorkloadPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: "normal"}, Value: 200},
	}
	if cq != nil {
		cq(base[1].(*kueue.ClusterQueue))
	}
	return fakeCluster{kube: kube, kueue: kueuefake.NewClientset(append(base, kueueObjs...)...)}
}

func fakeConfig() k8sbridge.Config {
	return k8sbridge.Config{
		Teams:      []k8sbridge.Team{{Name: "nlp", Namespace: "team-nlp"}},
		Flavors:    []allocator.Flavor{{Name: "h100", GPUsPerNode: 8}},
		Priorities: map[string]int32{"normal": 200},
		BlockLabel: "block", RackLabel: "rack",
		SubmitWait: 10 * time.Millisecond,
	}
}

func startFake(t *testing.T, f fakeCluster, opts ...k8sbridge.Option) (*k8sbridge.Bridge, *events) {
	t.Helper()
	b, err := k8sbridge.New(fakeConfig(), f.kube, f.kueue, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if _, err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	ev := &events{}
	go b.Run(ctx, ev.add)
	return b, ev
}

type events struct {
	mu sync.Mutex
	l  []allocator.Event
}

func (e *events) add(_ context.Context, evs []allocator.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.l = append(e.l, evs...)
}

func (e *events) wait(t *testing.T, kind allocator.EventKind, id string) allocator.Event {
	t.Helper()
	var got allocator.Event
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, x := range e.l {
			if x.Kind == kind && x.ID == id {
				got = x
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event for %s: %v", kind, id, err)
	}
	return got
}

func gpubotJob(id string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: k8sbridge.JobName(id), Namespace: "team-nlp", UID: types.UID("job-uid-" + id),
		Labels:      map[string]string{k8sbridge.LabelRequest: id, k8sbridge.LabelQueueName: "nlp"},
		Annotations: map[string]string{k8sbridge.AnnotationRequester: "alice", k8sbridge.AnnotationTeam: "nlp", k8sbridge.AnnotationPriority: "normal"}}}
}

func TestSnapshotMapsKueueObjects(t *testing.T) {
	j1, j2 := gpubotJob("r1"), gpubotJob("r2")
	w1 := fakeWorkload("team-nlp", "job-r1", 2, 8, j1)
	admit(w1, "h100", t0.Add(time.Minute), "n1", "n3")
	w2 := fakeWorkload("team-nlp", "job-r2", 1, 4, j2)
	foreign := fakeWorkload("team-nlp", "ci-run", 1, 2, nil)
	admit(foreign, "h100", t0)
	done := fakeWorkload("team-nlp", "old", 1, 8, nil)
	admit(done, "h100", t0)
	done.Status.Conditions = append(done.Status.Conditions, cond(kueue.WorkloadFinished, metav1.ConditionTrue, t0, "Succeeded", ""))
	f := newFake([]runtime.Object{gpuNode("n1", "r1", 8), gpuNode("n2", "r1", 8), gpuNode("n3", "r2", 8), j1, j2},
		[]runtime.Object{w1, w2, foreign, done})
	b, _ := startFake(t, f)
	snap, err := b.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := snap.Cluster()
	wantQ := []allocator.Queue{{Name: "nlp", Cohort: "research", Flavors: []string{"h100"}, Weight: 1,
		Quotas:     map[string]allocator.Quota{"h100": {Nominal: 16, BorrowingLimit: ptr.To(8)}},
		Preemption: allocator.Preemption{WithinClusterQueue: "LowerPriority", ReclaimWithinCohort: "Never"}}}
	if d := cmp.Diff(wantQ, c.Queues); d != "" {
		t.Errorf("queues (-want +got):\n%s", d)
	}
	wantN := []allocator.Node{{Name: "n1", Flavor: "h100", GPUs: 8, Block: "b1", Rack: "r1"}, {Name: "n2", Flavor: "h100", GPUs: 8, Block: "b1", Rack: "r1"},
		{Name: "n3", Flavor: "h100", GPUs: 8, Block: "b1", Rack: "r2"}}
	if d := cmp.Diff(wantN, c.Nodes); d != "" {
		t.Errorf("nodes (-want +got):\n%s", d)
	}
	got := map[string]string{}
	for _, w := range snap.Workloads() {
		s := "pending"
		if w.Admission != nil {
			s = w.Admission.Flavor + " " + fmtNodes(w.Admission.Nodes)
		}
		got[w.ID] = s
	}
	want := map[string]string{"r1": "h100 [n1 n3]", "r2": "pending", "k8s/team-nlp/ci-run": "h100 [n2]"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("workloads (-want +got):\n%s", d)
	}
	if got, _ := snap.Workload("r2"); got.GPUs != 4 || got.Priority != 200 {
		t.Errorf("r2 = %+v", got)
	}
}

func fmtNodes(n []string) string { return "[" + strings.Join(n, " ") + "]" }

func TestEventsFollowWorkloadTransitions(t *testing.T) {
	j1 := gpubotJob("r1")
	w1 := fakeWorkload("team-nlp", "job-r1", 1, 8, j1)
	f := newFake([]runtime.Object{gpuNode("n1", "r1", 8), j1}, []runtime.Object{w1})
	_, ev := startFake(t, f)
	ctx := context.Background()
	wls := f.kueue.KueueV1beta2().Workloads("team-nlp")
	update := func(mut func(*kueue.Workload)) {
		t.Helper()
		cur, err := wls.Get(ctx, "job-r1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		mut(cur)
		if _, err := wls.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update(func(w *kueue.Workload) { admit(w, "h100", t0.Add(time.Minute)) })
	if e := ev.wait(t, allocator.EventAdmitted, "r1"); e.Admission.Flavor != "h100" || !e.At.Equal(t0.Add(time.Minute)) {
		t.Errorf("admitted %+v at %v", e.Admission, e.At)
	}
	update(func(w *kueue.Workload) {
		w.Status.Admission = nil
		w.Status.Conditions = []metav1.Condition{cond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse, t0, "Pending", ""),
			cond(kueue.WorkloadEvicted, metav1.ConditionTrue, t0, "Preempted", ""),
			cond(kueue.WorkloadPreempted, metav1.ConditionTrue, t0, "InClusterQueue", "Preempted to accommodate a workload (UID: abc-1, JobUID: x)")}
	})
	ev.wait(t, allocator.EventPreempted, "r1")
	update(func(w *kueue.Workload) {
		admit(w, "h100", t0.Add(2*time.Minute))
		w.Status.Conditions = append(w.Status.Conditions, cond(kueue.WorkloadFinished, metav1.ConditionTrue, t0.Add(time.Hour), "Succeeded", ""))
	})
	if e := ev.wait(t, allocator.EventFinished, "r1"); !e.At.Equal(t0.Add(time.Hour)) {
		t.Errorf("finished at %v", e.At)
	}
}

func TestSubmitCreatesOneSuspendedJob(t *testing.T) {
	f := newFake([]runtime.Object{gpuNode("n1", "r1", 8), gpuNode("n2", "r2", 8)}, nil)
	b, _ := startFake(t, f)
	ctx := context.Background()
	w := allocator.Workload{ID: "r7", Queue: "nlp", GPUs: 16, Priority: 200, Flavor: "h100", Topology: allocator.LevelRack, Duration: 90 * time.Minute, Created: t0}
	for range 2 {
		if _, err := b.Apply(ctx, commands.Op{Kind: commands.OpSubmit, Workload: w}); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := f.kube.BatchV1().Jobs("team-nlp").List(ctx, metav1.ListOptions{})
	if err != nil || len(jobs.Items) != 1 {
		t.Fatalf("%d Jobs (%v), want 1", len(jobs.Items), err)
	}
	j := jobs.Items[0]
	if j.Name != "gpubot-r7" || !ptr.Deref(j.Spec.Suspend, false) || ptr.Deref(j.Spec.Parallelism, 0) != 2 {
		t.Errorf("job %s suspend=%v parallelism=%v", j.Name, j.Spec.Suspend, j.Spec.Parallelism)
	}
	wantLabels := map[string]string{k8sbridge.LabelRequest: "r7", k8sbridge.LabelQueueName: "nlp", k8sbridge.LabelPriorityClass: "normal", k8sbridge.LabelMaxExecTime: "5400"}
	if d := cmp.Diff(wantLabels, j.Labels); d != "" {
		t.Errorf("labels (-want +got):\n%s", d)
	}
	pt := j.Spec.Template
	if pt.Annotations[k8sbridge.AnnotationTASRequired] != "rack" || pt.Spec.NodeSelector["accel"] != "h100" {
		t.Errorf("pod template annotations %v, node selector %v", pt.Annotations, pt.Spec.NodeSelector)
	}
	if q := pt.Spec.Containers[0].Resources.Limits["nvidia.com/gpu"]; q.Value() != 8 {
		t.Errorf("GPUs per pod %v, want 8", q.Value())
	}
	// Removing deletes it; removing again is harmless.
	for range 2 {
		if _, err := b.Apply(ctx, commands.Op{Kind: commands.OpRemove, ID: "r7"}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCheckSaysWhenKueueIsMissing(t *testing.T) {
	f := newFake(nil, nil)
	f.kube.Resources = nil
	b, err := k8sbridge.New(fakeConfig(), f.kube, f.kueue)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Check(context.Background()); !errors.Is(err, k8sbridge.ErrKueueMissing) {
		t.Fatalf("Check = %v, want ErrKueueMissing", err)
	}
}

func TestJobNameIsDeterministicAndValid(t *testing.T) {
	for id, want := range map[string]string{"r12": "gpubot-r12", "R_3": "gpubot-r-3", "": "gpubot-"} {
		if got := k8sbridge.JobName(id); got != want {
			t.Errorf("JobName(%q) = %q, want %q", id, got, want)
		}
	}
}

// TestFinishedSaysHowItEnded: a Job that completes or fails on its own is
// not reported as having reached its requested time; one Kueue stopped at
// its maximum execution time is (no detail). A finished Job whose Workload
// is gone says so from the Job's conditions.
func TestFinishedSaysHowItEnded(t *testing.T) {
	at := t0.Add(time.Hour)
	finished := func(id, reason, msg string) (*batchv1.Job, *kueue.Workload) {
		j := gpubotJob(id)
		w := fakeWorkload("team-nlp", "job-"+id, 1, 8, j)
		admit(w, "h100", t0)
		w.Status.Conditions = append(w.Status.Conditions, cond(kueue.WorkloadFinished, metav1.ConditionTrue, at, reason, msg))
		return j, w
	}
	j1, w1 := finished("r1", kueue.WorkloadFinishedReasonSucceeded, "Job finished successfully")
	j2, w2 := finished("r2", kueue.WorkloadFinishedReasonFailed, "Job has reached the specified backoff limit.")
	j3 := gpubotJob("r3")
	w3 := fakeWorkload("team-nlp", "job-r3", 1, 8, j3)
	admit(w3, "h100", t0)
	w3.Spec.Active = ptr.To(false)
	w3.Status.Conditions = append(w3.Status.Conditions,
		cond(kueue.WorkloadDeactivationTarget, metav1.ConditionTrue, at, kueue.WorkloadMaximumExecutionTimeExceeded, "exceeding the maximum execution time"))
	j4 := gpubotJob("r4") // its Workload is gone
	j4.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", LastTransitionTime: metav1.NewTime(at)}}
	f := newFake([]runtime.Object{gpuNode("n1", "r1", 8), j1, j2, j3, j4}, []runtime.Object{w1, w2, w3})
	_, ev := startFake(t, f)
	for id, want := range map[string]string{
		"r1": "its Job completed",
		"r2": "its Job failed: Job has reached the specified backoff limit",
		"r3": "",
		"r4": "its Job failed: DeadlineExceeded",
	} {
		if e := ev.wait(t, allocator.EventFinished, id); e.Detail != want {
			t.Errorf("%s finished with detail %q, want %q", id, e.Detail, want)
		}
	}
}

// A workload that finished while gpubot was down is reported as admitted,
// then finished, in that order, so that a queued request can end.
func TestFinishedWhileDownIsReportedInOrder(t *testing.T) {
	j1 := gpubotJob("r1")
	w1 := fakeWorkload("team-nlp", "job-r1", 1, 8, j1)
	admit(w1, "h100", t0)
	w1.Status.Conditions = append(w1.Status.Conditions, cond(kueue.WorkloadFinished, metav1.ConditionTrue, t0.Add(time.Hour), "Succeeded", ""))
	f := newFake([]runtime.Object{gpuNode("n1", "r1", 8), j1}, []runtime.Object{w1})
	_, ev := startFake(t, f)
	ev.wait(t, allocator.EventFinished, "r1")
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var kinds []allocator.EventKind
	for _, e := range ev.l {
		kinds = append(kinds, e.Kind)
	}
	if d := cmp.Diff([]allocator.EventKind{allocator.EventAdmitted, allocator.EventFinished}, kinds); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if a := ev.l[0].Admission; a == nil || a.Flavor != "h100" {
		t.Errorf("admission %+v, want on h100", a)
	}
}
