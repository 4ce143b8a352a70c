package k8sbridge_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/k8sbridge"
)

// Unit tests of the pods' readiness on the fake clientsets.

// jobPod is pod i of a gpubot Job, pending and unscheduled.
func jobPod(j *batchv1.Job, i int) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-p%d", j.Name, i), Namespace: j.Namespace,
		Labels:          map[string]string{k8sbridge.LabelRequest: j.Labels[k8sbridge.LabelRequest]},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID, Controller: ptr.To(true)}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
}

func running(p *corev1.Pod, at time.Time) {
	p.Spec.NodeName = "n1"
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(at)}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
}

func imagePullBackOff(p *corev1.Pod) {
	p.Spec.NodeName = "n1"
	p.Status.Phase = corev1.PodPending
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
		Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: `Back-off pulling image "nope"`}}}}
}

func unschedulable(p *corev1.Pod) {
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
		Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."}}
}

// kinds lists the events about id other than kinds in skip, as "kind detail".
func (e *events) of(id string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, x := range e.l {
		if x.ID != id {
			continue
		}
		s := string(x.Kind)
		if x.Kind == allocator.EventPodsReady || x.Kind == allocator.EventPodsNotReady {
			s += fmt.Sprintf(" %d", x.Pods)
		}
		if x.Detail != "" {
			s += " " + x.Detail
		}
		out = append(out, s)
	}
	return out
}

// settle lets the bridge see every change made so far: it makes one more
// change that causes an event and waits for it.
func settle(t *testing.T, f fakeCluster, ev *events, n int) {
	t.Helper()
	id := fmt.Sprintf("settle-%d", n)
	j := gpubotJob(id)
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	if _, err := f.kube.BatchV1().Jobs("team-nlp").Create(context.Background(), j, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ev.wait(t, allocator.EventFinished, id)
}

func setPod(t *testing.T, f fakeCluster, p *corev1.Pod, mut func(*corev1.Pod)) {
	t.Helper()
	mut(p)
	if _, err := f.kube.CoreV1().Pods(p.Namespace).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestPodsReadyThenNotReady: all pods ready is reported once; a pod that
// stops being ready is reported once with what is wrong; a restarted
// bridge reads what was reported from the Job and does not repeat it.
func TestPodsReadyThenNotReady(t *testing.T) {
	clk := testingclock.NewFakeClock(t0.Add(2 * time.Minute))
	j1 := gpubotJob("r1")
	j1.Spec.Parallelism = ptr.To[int32](2)
	w1 := fakeWorkload("team-nlp", "job-r1", 2, 8, j1)
	admit(w1, "h100", t0.Add(time.Minute))
	p1, p2 := jobPod(j1, 1), jobPod(j1, 2)
	f := newFake([]runtime.Object{gpuNode("n1", "r1", 8), gpuNode("n2", "r1", 8), j1, p1, p2}, []runtime.Object{w1})
	_, ev := startFake(t, f, k8sbridge.WithClock(clk))
	ev.wait(t, allocator.EventAdmitted, "r1")

	setPod(t, f, p1, func(p *corev1.Pod) { running(p, t0.Add(90*time.Second)) })
	settle(t, f, ev, 1)
	if got := ev.of("r1"); len(got) != 1 {
		t.Fatalf("with 1 of 2 pods ready (before the timeout): %v, want only the admission", got)
	}
	setPod(t, f, p2, func(p *corev1.Pod) { running(p, t0.Add(100*time.Second)) })
	if e := ev.wait(t, allocator.EventPodsReady, "r1"); !e.At.Equal(t0.Add(100*time.Second)) || e.Pods != 2 {
		t.Errorf("pods ready at %v with %d pods, want at the last pod's readiness with 2", e.At, e.Pods)
	}
	// Resyncs and unrelated changes do not repeat it.
	setPod(t, f, p1, func(p *corev1.Pod) { p.Status.Message = "touched" })
	settle(t, f, ev, 2)
	job, err := f.kube.BatchV1().Jobs("team-nlp").Get(context.Background(), j1.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := job.Annotations[k8sbridge.AnnotationPods], "ready "+t0.Add(time.Minute).Format(time.RFC3339); got != want {
		t.Errorf("Job annotation %q, want %q", got, want)
	}

	clk.Step(time.Hour)
	setPod(t, f, p2, imagePullBackOff)
	ev.wait(t, allocator.EventPodsNotReady, "r1")
	setPod(t, f, p2, func(p *corev1.Pod) { p.Status.Message = "still" })
	settle(t, f, ev, 3)
	want := []string{"admitted", "pods-ready 2", "pods-not-ready 2 1 of 2 pods ready; pod gpubot-r1-p2: ImagePullBackOff"}
	if d := cmp.Diff(want, ev.of("r1")); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}

	// A restarted bridge (the same cluster) reports the admission again,
	// which the service ignores, but not the pods' state it recorded.
	_, ev2 := startFake(t, f, k8sbridge.WithClock(clk))
	ev2.wait(t, allocator.EventAdmitted, "r1")
	settle(t, f, ev2, 4)
	if d := cmp.Diff([]string{"admitted"}, ev2.of("r1")); d != "" {
		t.Errorf("after a restart (-want +got):\n%s", d)
	}
	setPod(t, f, p2, func(p *corev1.Pod) { running(p, clk.Now()) })
	if e := ev2.wait(t, allocator.EventPodsReady, "r1"); !e.At.Equal(clk.Now()) {
		t.Errorf("ready again at %v, want %v", e.At, clk.Now())
	}
}

// TestPodsNotReadyAfterTimeout: pods that are still not ready the
// configured time after admission are reported once, with the reason the
// scheduler gave.
func TestPodsNotReadyAfterTimeout(t *testing.T) {
	clk := testingclock.NewFakeClock(t0.Add(time.Minute))
	j1 := gpubotJob("r1")
	j1.Spec.Parallelism = ptr.To[int32](2)
	w1 := fakeWorkload("team-nlp", "job-r1", 2, 8, j1)
	admit(w1, "h100", t0)
	p1, p2 := jobPod(j1, 1), jobPod(j1, 2)
	unschedulable(p1)
	unschedulable(p2)
	f := newFake([]runtime.Object{gpuNode("n1", "r1", 8), j1, p1, p2}, []runtime.Object{w1})
	_, ev := startFake(t, f, k8sbridge.WithClock(clk))
	ev.wait(t, allocator.EventAdmitted, "r1")
	settle(t, f, ev, 1)
	if got := ev.of("r1"); len(got) != 1 {
		t.Fatalf("before the timeout: %v", got)
	}
	// The default timeout is 10 minutes after admission; the bridge wakes
	// up by itself.
	waitWaiters(t, clk)
	clk.SetTime(t0.Add(10 * time.Minute))
	e := ev.wait(t, allocator.EventPodsNotReady, "r1")
	wantDetail := "0 of 2 pods ready; pod gpubot-r1-p1: Unschedulable: 0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
	if e.Detail != wantDetail || !e.At.Equal(t0.Add(10*time.Minute)) {
		t.Errorf("not ready at %v: %q, want at the timeout: %q", e.At, e.Detail, wantDetail)
	}
	setPod(t, f, p1, func(p *corev1.Pod) { p.Status.Message = "touched" })
	clk.Step(time.Hour)
	settle(t, f, ev, 2)
	if got := ev.of("r1"); len(got) != 2 {
		t.Errorf("events %v, want the admission and one not-ready", got)
	}
}

// waitWaiters waits until the bridge has set its timer on clk.
func waitWaiters(t *testing.T, clk *testingclock.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the bridge set no timer")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestPodsReadyFromKueueOrTheJob: for a Job whose pods gpubot does not
// see (a tracked Job), Kueue's PodsReady condition (set when
// waitForPodsReady is on) or else the Job's ready count decides.
func TestPodsReadyFromKueueOrTheJob(t *testing.T) {
	j1, j2 := gpubotJob("r1"), gpubotJob("r2")
	w1 := fakeWorkload("team-nlp", "job-r1", 2, 4, j1)
	admit(w1, "h100", t0)
	w1.Status.Conditions = append(w1.Status.Conditions, cond(kueue.WorkloadPodsReady, metav1.ConditionTrue, t0.Add(time.Minute), "Started", ""))
	w2 := fakeWorkload("team-nlp", "job-r2", 2, 4, j2)
	admit(w2, "h100", t0)
	j2.Status.Ready, j2.Status.Active = ptr.To[int32](1), 1
	clk := testingclock.NewFakeClock(t0.Add(5 * time.Minute))
	f := newFake([]runtime.Object{gpuNode("n1", "r1", 8), j1, j2}, []runtime.Object{w1, w2})
	_, ev := startFake(t, f, k8sbridge.WithClock(clk))
	if e := ev.wait(t, allocator.EventPodsReady, "r1"); !e.At.Equal(t0.Add(time.Minute)) || e.Pods != 2 {
		t.Errorf("r1 pods ready at %v (%d pods), want Kueue's condition's time, 2 pods", e.At, e.Pods)
	}
	ev.wait(t, allocator.EventAdmitted, "r2")
	settle(t, f, ev, 1)
	if got := ev.of("r2"); len(got) != 1 {
		t.Errorf("r2 with 1 of 2 ready: %v", got)
	}
	j2.Status.Ready, j2.Status.Active = ptr.To[int32](2), 2
	if _, err := f.kube.BatchV1().Jobs("team-nlp").UpdateStatus(context.Background(), j2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if e := ev.wait(t, allocator.EventPodsReady, "r2"); !e.At.Equal(clk.Now()) {
		t.Errorf("r2 ready at %v, want now", e.At)
	}
}

// TestPodsReadyAgainAfterReadmission: a preempted and readmitted workload's
// pods are a new story: their readiness is reported again.
func TestPodsReadyAgainAfterReadmission(t *testing.T) {
	clk := testingclock.NewFakeClock(t0.Add(time.Hour))
	j1 := gpubotJob("r1")
	w1 := fakeWorkload("team-nlp", "job-r1", 1, 8, j1)
	admit(w1, "h100", t0)
	p1 := jobPod(j1, 1)
	running(p1, t0.Add(time.Minute))
	f := newFake([]runtime.Object{gpuNode("n1", "r1", 8), j1, p1}, []runtime.Object{w1})
	_, ev := startFake(t, f, k8sbridge.WithClock(clk))
	ev.wait(t, allocator.EventPodsReady, "r1")
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
	update(func(w *kueue.Workload) {
		w.Status.Admission = nil
		w.Status.Conditions = []metav1.Condition{cond(kueue.WorkloadQuotaReserved, metav1.ConditionFalse, t0, "Pending", ""),
			cond(kueue.WorkloadEvicted, metav1.ConditionTrue, t0, "Preempted", "")}
	})
	ev.wait(t, allocator.EventPreempted, "r1")
	update(func(w *kueue.Workload) { admit(w, "h100", t0.Add(2*time.Hour)) })
	clk.SetTime(t0.Add(2*time.Hour + time.Minute))
	setPod(t, f, p1, func(p *corev1.Pod) { running(p, t0.Add(2*time.Hour+time.Minute)) })
	settle(t, f, ev, 1)
	want := []string{"admitted", "pods-ready 1", "preempted", "admitted", "pods-ready 1"}
	if d := cmp.Diff(want, ev.of("r1")); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
}

// TestPodsGoingWithTheirNodeAreNotNoise: when a workload's node goes away
// (a spot node reclaimed) its pods stop being ready before Kueue evicts
// it; that is the eviction's to tell, not a pods-not-ready report and a
// "free the GPUs" message to the owner. The same pods stopping on a node
// that is still there are reported.
func TestPodsGoingWithTheirNodeAreNotNoise(t *testing.T) {
	clk := testingclock.NewFakeClock(t0.Add(2 * time.Minute))
	j1 := gpubotJob("r1")
	w1 := fakeWorkload("team-nlp", "job-r1", 1, 8, j1)
	admit(w1, "h100", t0.Add(time.Minute))
	p1 := jobPod(j1, 1)
	f := newFake([]runtime.Object{gpuNode("n1", "r1", 8), gpuNode("n2", "r1", 8), j1, p1}, []runtime.Object{w1})
	b, ev := startFake(t, f, k8sbridge.WithClock(clk))
	ev.wait(t, allocator.EventAdmitted, "r1")
	setPod(t, f, p1, func(p *corev1.Pod) { running(p, t0.Add(90*time.Second)) })
	ev.wait(t, allocator.EventPodsReady, "r1")

	clk.Step(time.Hour)
	if err := f.kube.CoreV1().Nodes().Delete(context.Background(), "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The node and pod informers are separate: the pod's failure must not
	// be seen before the node's deletion (this test is of the bridge
	// knowing the node is gone, not of the order of two watches).
	waitNodeGone(t, b, "n1")
	setPod(t, f, p1, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodFailed
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "NodeLost"}}
	})
	settle(t, f, ev, 1)
	if d := cmp.Diff([]string{"admitted", "pods-ready 1"}, ev.of("r1")); d != "" {
		t.Errorf("events after the node went (-want +got):\n%s", d)
	}

	// On a node that is still there, the same trouble is reported.
	j2 := gpubotJob("r2")
	w2 := fakeWorkload("team-nlp", "job-r2", 1, 8, j2)
	admit(w2, "h100", t0.Add(time.Minute))
	p2 := jobPod(j2, 1)
	p2.Spec.NodeName = "n2"
	f2 := newFake([]runtime.Object{gpuNode("n2", "r1", 8), j2, p2}, []runtime.Object{w2})
	_, ev2 := startFake(t, f2, k8sbridge.WithClock(clk))
	setPod(t, f2, p2, func(p *corev1.Pod) { running(p, t0.Add(90*time.Second)); p.Spec.NodeName = "n2" })
	ev2.wait(t, allocator.EventPodsReady, "r2")
	setPod(t, f2, p2, imagePullBackOff)
	ev2.wait(t, allocator.EventPodsNotReady, "r2")
}

// waitNodeGone waits until b's view of the cluster no longer has node.
func waitNodeGone(t *testing.T, b *k8sbridge.Bridge, node string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		snap, err := b.Snapshot(ctx)
		if err != nil {
			return false, err
		}
		return !slices.ContainsFunc(snap.Cluster().Nodes, func(n allocator.Node) bool { return n.Name == node }), nil
	})
	if err != nil {
		t.Fatalf("the bridge still shows node %s 10 s after its deletion: %v", node, err)
	}
}
