package k8sbridge_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/k8sbridge"
)

// kueuePodsReady returns Kueue's PodsReady condition on request id's
// Workload (nil if it has none), and whether the Workload was found.
func (s *scenario) kueuePodsReady(id string) (*metav1.Condition, bool) {
	s.t.Helper()
	for _, j := range s.jobsOf(id) {
		wls, err := s.kueue.KueueV1beta2().Workloads(j.Namespace).List(s.ctx, metav1.ListOptions{})
		if err != nil {
			s.t.Fatal(err)
		}
		for _, wl := range wls.Items {
			for _, o := range wl.OwnerReferences {
				if o.UID == j.UID {
					return apimeta.FindStatusCondition(wl.Status.Conditions, kueue.WorkloadPodsReady), true
				}
			}
		}
	}
	return nil, false
}

// TestPodsReadyOnKwok: Kueue admits a 2-pod request, kube-scheduler binds
// its pods to kwok nodes, kwok makes them ready (and then finishes them),
// and the bridge reports the pods ready exactly once, between the
// admission and the end, and records that on the Job. Kueue v0.17.0 sets
// no PodsReady condition here (waitForPodsReady is off): the bridge
// counts the pods.
func TestPodsReadyOnKwok(t *testing.T) {
	s := newScenario(t, map[string]int{"h100": 0}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 16}}})
	s.fakeNodes("h100", 1, 2)
	s.start()
	s.submit(s.workload("r1", "nlp", 16, 200))
	ad := s.waitEvent(allocator.EventAdmitted, "r1")
	ev := s.waitEvent(allocator.EventPodsReady, "r1")
	if ev.Pods != 2 || ev.At.Before(ad.At) {
		t.Errorf("pods ready at %v with %d pods; want 2 pods, not before the admission at %v", ev.At, ev.Pods, ad.At)
	}
	c, found := s.kueuePodsReady("r1")
	if !found {
		t.Fatal("r1's Workload is gone")
	}
	t.Logf("Kueue's PodsReady condition on the Workload: %+v", c)
	s.waitEvent(allocator.EventFinished, "r1")
	var kinds []allocator.EventKind
	s.mu.Lock()
	for _, e := range s.events {
		if e.ID == "r1" {
			kinds = append(kinds, e.Kind)
		}
	}
	s.mu.Unlock()
	want := []allocator.EventKind{allocator.EventAdmitted, allocator.EventPodsReady, allocator.EventFinished}
	if strings.Join(kindStrings(kinds), " ") != strings.Join(kindStrings(want), " ") {
		t.Errorf("events of r1: %v, want %v", kinds, want)
	}
	if got := s.jobsOf("r1")[0].Annotations[k8sbridge.AnnotationPods]; !strings.HasPrefix(got, "ready ") {
		t.Errorf("Job annotation %s = %q, want ready", k8sbridge.AnnotationPods, got)
	}
}

func kindStrings(ks []allocator.EventKind) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = string(k)
	}
	return out
}

// TestPodsNotReadyOnKwok: Kueue admits by quota a request whose Job's
// template pins its pods to nodes that do not exist; kube-scheduler cannot
// place them, and once the timeout after admission passes on the
// bridge's clock (a fake one, stepped here) the bridge reports the pods
// not ready, once, with the scheduler's reason.
func TestPodsNotReadyOnKwok(t *testing.T) {
	s := newScenario(t, map[string]int{"h100": 0}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 16}}})
	s.fakeNodes("h100", 1, 2)
	s.cfg.PodsReadyTimeout = 10 * time.Minute
	s.cfg.Templates = map[string][]byte{"": []byte(k8sbridge.DefaultJobTemplate + "      nodeSelector:\n        gpubot.io/nowhere: \"true\"\n")}
	clk := clocktesting.NewFakeClock(time.Now())
	s.start(k8sbridge.WithClock(clk))
	s.submit(s.workload("r1", "nlp", 8, 200))
	ad := s.waitEvent(allocator.EventAdmitted, "r1")
	// The pods are unschedulable at once; they count as not ready only
	// once the timeout has passed.
	s.eventually("r1's pods unschedulable", func() bool { return s.podsUnschedulable("r1") })
	if s.hasEvent(allocator.EventPodsNotReady, "r1") {
		t.Fatalf("pods reported not ready before the timeout")
	}
	clk.Step(s.cfg.PodsReadyTimeout + time.Second)
	ev := s.waitEvent(allocator.EventPodsNotReady, "r1")
	if ev.At.Sub(ad.At) < s.cfg.PodsReadyTimeout {
		t.Errorf("not ready reported at %v, %v after the admission; want after the timeout", ev.At, ev.At.Sub(ad.At))
	}
	if !strings.HasPrefix(ev.Detail, "0 of 1 pods ready; pod gpubot-r1-") || !strings.Contains(ev.Detail, "Unschedulable") {
		t.Errorf("detail %q, want 0 of 1 ready and the pod unschedulable", ev.Detail)
	}
	t.Logf("detail: %s", ev.Detail)
	// Nothing more arrives about it while nothing changes: many timeouts
	// later, by the time the bridge reports another workload's admission
	// (its every batch says all it has to say as of then), r1 has had one
	// pods event.
	clk.Step(5 * s.cfg.PodsReadyTimeout)
	s.submit(s.workload("r2", "nlp", 8, 200))
	s.waitEvent(allocator.EventAdmitted, "r2")
	n := 0
	s.mu.Lock()
	for _, e := range s.events {
		if e.ID == "r1" && (e.Kind == allocator.EventPodsNotReady || e.Kind == allocator.EventPodsReady) {
			n++
		}
	}
	s.mu.Unlock()
	if n != 1 {
		t.Errorf("%d pods events for r1, want 1", n)
	}
	s.apply(commands.Op{Kind: commands.OpRemove, ID: "r1"})
	s.apply(commands.Op{Kind: commands.OpRemove, ID: "r2"})
}

// podsUnschedulable reports whether request id's pods exist and the
// scheduler has said it cannot place them.
func (s *scenario) podsUnschedulable(id string) bool {
	pods, err := s.kube.CoreV1().Pods("").List(s.ctx, metav1.ListOptions{LabelSelector: k8sbridge.LabelRequest + "=" + id})
	if err != nil || len(pods.Items) == 0 {
		return false
	}
	for _, p := range pods.Items {
		scheduled := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				scheduled = true
			}
		}
		if !scheduled {
			return false
		}
	}
	return true
}
