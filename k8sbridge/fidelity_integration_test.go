package k8sbridge_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/k8sbridge"
	"github.com/gpubot/gpubot/k8sbridge/k8senv"
)

// Fidelity: the same submissions go through gpubot's allocator (on the
// bridge's snapshot) and through the real Kueue, and the decisions must
// agree: admitted or not, on which flavor, and in which order waiting
// work is admitted as capacity frees.

// verdict is one workload's fate: the flavor it was admitted on, or "".
type verdict map[string]string

// predict asks the allocator what one more workload does: it adds w to
// the bridge's snapshot and runs a scheduling cycle.
func (s *scenario) predict(w allocator.Workload) verdict {
	s.t.Helper()
	snap, err := s.bridge.Snapshot(s.ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := snap.Add(w); err != nil {
		s.t.Fatal(err)
	}
	return admittedIn(snap.Schedule())
}

// predictRelease asks the allocator what freeing id admits.
func (s *scenario) predictRelease(id string) verdict {
	s.t.Helper()
	snap, err := s.bridge.Snapshot(s.ctx)
	if err != nil {
		s.t.Fatal(err)
	}
	if _, err := snap.Release(id); err != nil {
		s.t.Fatal(err)
	}
	return admittedIn(snap.Schedule())
}

func admittedIn(evs []allocator.Event) verdict {
	v := verdict{}
	for _, e := range evs {
		switch e.Kind {
		case allocator.EventAdmitted:
			v[e.ID] = e.Admission.Flavor
		case allocator.EventPreempted:
			v[e.ID] = "preempted"
		}
	}
	return v
}

// kueueDecided waits until Kueue has decided on request id — admitted it,
// or tried and left it pending — and returns the flavor or "".
func (s *scenario) kueueDecided(id string) string {
	s.t.Helper()
	flavor := ""
	s.eventually("Kueue's decision on "+id, func() bool {
		for _, j := range s.jobsOf(id) {
			wls, err := s.kueue.KueueV1beta2().Workloads(j.Namespace).List(s.ctx, metav1.ListOptions{})
			if err != nil {
				return false
			}
			for _, wl := range wls.Items {
				if len(wl.OwnerReferences) == 0 || wl.OwnerReferences[0].UID != j.UID {
					continue
				}
				for _, c := range wl.Status.Conditions {
					if c.Type == kueue.WorkloadQuotaReserved && c.Status == metav1.ConditionFalse && !strings.Contains(c.Message, "Pending the preemption") {
						return true // tried, pending
					}
				}
				if condTrue(wl.Status.Conditions, kueue.WorkloadAdmitted) {
					flavor = string(wl.Status.Admission.PodSetAssignments[0].Flavors["nvidia.com/gpu"])
					return s.hasEvent(allocator.EventAdmitted, id)
				}
			}
		}
		return false
	})
	return flavor
}

// preemptedSince adds to v the preemptions reported after the first n events.
func (s *scenario) preemptedSince(n int, v verdict) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.events[n:] {
		if e.Kind == allocator.EventPreempted {
			v[e.ID] = "preempted"
		}
	}
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

func (s *scenario) check(what string, want, got verdict) {
	s.t.Helper()
	if fmt.Sprint(want) != fmt.Sprint(got) {
		s.t.Errorf("%s: allocator predicted %v, Kueue did %v", what, want, got)
		s.mu.Lock()
		s.t.Logf("events: %+v", s.events)
		s.mu.Unlock()
		wls, _ := s.kueue.KueueV1beta2().Workloads("").List(s.ctx, metav1.ListOptions{})
		for _, wl := range wls.Items {
			s.t.Logf("%s/%s: %+v", wl.Namespace, wl.Name, wl.Status.Conditions)
		}
	}
}

// TestFidelityExampleSetup runs the bundled example's Kueue setup
// (deploy/kueue/setup.yaml) on kwok nodes laid out as in
// deploy/gpubot.example.yaml, through a sequence that exercises flavor
// order, borrowing limits, the cohort's lending limits and reclaiming
// capacity.
func TestFidelityExampleSetup(t *testing.T) {
	s := newScenario(t, nil)
	if _, err := k8senv.ApplyFile(s.ctx, env.Config, filepath.Join("..", "deploy", "kueue", "setup.yaml"), ""); err != nil {
		t.Fatal(err)
	}
	exampleNodes(s, "h100", "nvidia-h100-80gb", 2, 2, 4)
	exampleNodes(s, "a100", "nvidia-a100-80gb", 1, 2, 4)
	if err := k8senv.WaitNodesReady(s.ctx, s.kube, 24); err != nil {
		t.Fatal(err)
	}
	s.cfg = k8sbridge.Config{
		Teams:      []k8sbridge.Team{{Name: "nlp"}, {Name: "vision"}, {Name: "speech"}},
		Flavors:    []allocator.Flavor{{Name: "h100", GPUsPerNode: 8}, {Name: "a100", GPUsPerNode: 8}},
		Priorities: map[string]int32{"low": 100, "normal": 200, "high": 500, "urgent": 1000},
		// Pods stay running on kwok for the whole test.
		Templates: map[string][]byte{"": []byte(k8sbridge.DefaultJobTemplate + `    metadata:
      annotations:
        pod-complete.stage.kwok.x-k8s.io/delay: 1h
        pod-complete.stage.kwok.x-k8s.io/jitter-delay: 1h
`)},
	}
	b := s.start()
	s.eventually("24 nodes and 3 queues in the snapshot", func() bool {
		snap, err := b.Snapshot(s.ctx)
		return err == nil && len(snap.Cluster().Nodes) == 24 && len(slices.DeleteFunc(snap.Cluster().Queues, func(q allocator.Queue) bool {
			return q.Name != "nlp" && q.Name != "vision" && q.Name != "speech"
		})) == 3
	})
	steps := []struct {
		id, team string
		gpus     int
	}{
		{"f1", "speech", 24}, // speech tries a100 first
		{"f2", "nlp", 64},    // nlp's nominal h100
		{"f3", "vision", 48}, // vision's nominal h100
		{"f4", "nlp", 32},    // h100: the pool lends only 16; a100 borrows 16
		{"f5", "vision", 16}, // h100: the last 16, borrowed
		{"f6", "speech", 16}, // a100 lends only 8 more; speech reclaims its h100 quota from vision's f5
	}
	for _, st := range steps {
		w := s.workload(st.id, st.team, st.gpus, 200)
		want := s.predict(w)
		s.nextSecond()
		n := s.eventCount()
		s.submit(w)
		got := verdict{}
		if f := s.kueueDecided(st.id); f != "" {
			got[st.id] = f
		}
		s.preemptedSince(n, got)
		s.check("submitting "+st.id, want, got)
	}
	want := s.predictRelease("f2")
	n := s.eventCount()
	s.apply(commands.Op{Kind: commands.OpRemove, ID: "f2"})
	got := verdict{}
	s.eventually("the admissions after releasing f2", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, e := range s.events[n:] {
			if e.Kind == allocator.EventAdmitted {
				got[e.ID] = e.Admission.Flavor
			}
		}
		return len(got) >= len(want)
	})
	s.check("releasing f2", want, got)
}

// exampleNodes creates kwok nodes named as the simulated cluster names them.
func exampleNodes(s *scenario, flavor, accel string, blocks, racks, nodes int) {
	s.t.Helper()
	for b := 1; b <= blocks; b++ {
		for r := 1; r <= racks; r++ {
			for n := 1; n <= nodes; n++ {
				name := fmt.Sprintf("%s-b%d-r%d-n%d", flavor, b, r, n)
				node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
					Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
					Labels: map[string]string{"cloud.google.com/gke-accelerator": accel, "kubernetes.io/hostname": name,
						"cloud.google.com/gce-topology-block":    fmt.Sprintf("%s-b%d", flavor, b),
						"cloud.google.com/gce-topology-subblock": fmt.Sprintf("%s-b%d-r%d", flavor, b, r), "type": "kwok"}}}
				if _, err := s.kube.CoreV1().Nodes().Create(s.ctx, node, metav1.CreateOptions{}); err != nil {
					s.t.Fatal(err)
				}
				alloc := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("8"), "cpu": resource.MustParse("32"),
					"memory": resource.MustParse("256Gi"), "pods": resource.MustParse("110")}
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
			}
		}
	}
}

// TestFidelityAdmissionOrder queues three requests behind a full team —
// two of normal priority, then one of high — and frees the room one
// request at a time: Kueue must admit them in the order the allocator
// predicts (priority, then arrival).
func TestFidelityAdmissionOrder(t *testing.T) {
	s := newScenario(t, map[string]int{"h100": 1}, teamSpec{name: "nlp", quotas: []flavorQuota{{flavor: "h100", nominal: 8}}})
	s.start()
	s.submit(s.workload("r0", "nlp", 8, 200))
	s.waitEvent(allocator.EventAdmitted, "r0")
	for _, p := range []struct {
		id   string
		prio int32
	}{{"r1", 200}, {"r2", 200}, {"r3", 500}} {
		s.nextSecond()
		s.submit(s.workload(p.id, "nlp", 8, p.prio))
		if f := s.kueueDecided(p.id); f != "" {
			t.Fatalf("%s admitted on %s while the team is full", p.id, f)
		}
	}
	running := "r0"
	var kueueOrder, predicted []string
	for range 3 {
		want := s.predictRelease(running)
		if len(want) != 1 {
			t.Fatalf("allocator predicts %v after releasing %s", want, running)
		}
		for id := range want {
			predicted = append(predicted, id)
		}
		s.apply(commands.Op{Kind: commands.OpRemove, ID: running})
		s.eventually("the next admission after "+running, func() bool {
			for _, id := range []string{"r1", "r2", "r3"} {
				if !slices.Contains(kueueOrder, id) && s.hasEvent(allocator.EventAdmitted, id) {
					kueueOrder = append(kueueOrder, id)
					running = id
					return true
				}
			}
			return false
		})
	}
	if fmt.Sprint(predicted) != fmt.Sprint(kueueOrder) || fmt.Sprint(kueueOrder) != "[r3 r1 r2]" {
		t.Errorf("admission order: allocator %v, Kueue %v; want [r3 r1 r2]", predicted, kueueOrder)
	}
}
