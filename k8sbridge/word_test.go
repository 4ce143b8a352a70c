package k8sbridge

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/allocator"
)

// The messages below are Kueue v0.17's, as its flavor assigner, TAS
// snapshot and scheduler write them (and as the integration tests saw
// them on the real controller).
func TestWordOfPendingWorkloads(t *testing.T) {
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	pending := func(msg string) *kueue.Workload {
		return &kueue.Workload{Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{{
			Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Pending", Message: msg, LastTransitionTime: metav1.NewTime(at)}}}}
	}
	fitsEmpty := func() (bool, string) { return true, "" }
	neverEmpty := func() (bool, string) {
		return false, "flavor a100 has no nodes, and Kueue's topology-aware scheduling admits only onto nodes that exist"
	}
	type want struct {
		never bool
		plain string
		why   string
	}
	tests := map[string]struct {
		msg     string
		flavors []string
		fits    func() (bool, string)
		want    want
	}{
		"the issue's: no flavor matches": {
			msg:  "couldn't assign flavors to pod set main: flavor a100 doesn't match node affinity",
			want: want{never: true, why: "its pods' node selector does not match flavor a100", plain: "Kueue cannot admit it as it is: its pods' node selector does not match flavor a100"},
		},
		"over quota even with borrowing": {
			msg:  "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor h100, previously considered podsets requests (0) + current podset request (24) > maximum capacity (16)",
			want: want{never: true, why: "it needs more nvidia.com/gpu on h100 than its team may ever use there, even borrowing from the cohort (at most 16)"},
		},
		"quota in use": {
			msg:  "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed",
			want: want{plain: "Kueue waits for room: 8 more nvidia.com/gpu needed on h100"},
		},
		"pinned: other flavors do not match, its own has no nodes": {
			msg:     `couldn't assign flavors to pod set main: flavor a100 doesn't match node affinity, no topology domains at level: kubernetes.io/hostname`,
			flavors: []string{"h100"},
			fits:    func() (bool, string) { return false, "flavor h100 has no nodes" },
			want:    want{never: true, why: "flavor h100 has no nodes"},
		},
		"pinned: the other flavor's mismatch is beside the point": {
			msg:     "couldn't assign flavors to pod set main: flavor a100 doesn't match node affinity",
			flavors: []string{"h100"},
			fits:    fitsEmpty,
			want:    want{plain: "Kueue has not admitted it: couldn't assign flavors to pod set main: flavor a100 doesn't match node affinity"},
		},
		"one flavor never, the other in use": {
			msg:  "couldn't assign flavors to pod set main: flavor a100 doesn't match node affinity, insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed",
			want: want{plain: "Kueue waits for room: 8 more nvidia.com/gpu needed on h100"},
		},
		"no room on the nodes now": {
			msg:  `couldn't assign flavors to pod set main: topology "gpu-topology" doesn't allow to fit any of 1 pod(s)`,
			fits: fitsEmpty,
			want: want{plain: "Kueue waits for room: no room for its pods on the nodes of topology gpu-topology now"},
		},
		"no room on the nodes ever": {
			msg:  `couldn't assign flavors to pod set main: topology "gpu-topology" allows to fit only 1 out of 3 pod(s)`,
			fits: neverEmpty,
			want: want{never: true, why: "flavor a100 has no nodes, and Kueue's topology-aware scheduling admits only onto nodes that exist"},
		},
		"preempting": {
			msg:  "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed. Pending the preemption of 1 workload(s)",
			want: want{plain: "Kueue is preempting 1 workload(s) to make room for it"},
		},
		"stopped queue": {
			msg:  "ClusterQueue nlp is inactive",
			want: want{never: true, why: "its ClusterQueue nlp is inactive (stopped, or missing a flavor or admission check)", plain: "Kueue admits nothing from its ClusterQueue nlp: it is inactive"},
		},
		"topology without the level": {
			msg:  `couldn't assign flavors to pod set main: Flavor "h100" does not contain the requested level`,
			want: want{never: true, why: "flavor h100's topology has no such level"},
		},
		"unknown": {
			msg:  "something new in Kueue v0.99",
			want: want{plain: "Kueue has not admitted it: something new in Kueue v0.99"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w, ok := wordOf(pending(tc.msg), tc.flavors, tc.fits)
			if !ok {
				t.Fatal("no word")
			}
			got := want{never: w.Never, why: w.Why, plain: w.Plain}
			if tc.want.plain == "" {
				got.plain = ""
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("word (-want +got):\n%s", diff)
			}
			if w.Message != tc.msg || !strings.HasPrefix(w.Raw(), "QuotaReserved=False (Pending): ") || !w.At.Equal(at) {
				t.Errorf("raw %q at %v; want Kueue's message verbatim", w.Raw(), w.At)
			}
		})
	}
}

func TestWordOfOtherStates(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	if _, ok := wordOf(&kueue.Workload{}, nil, nil); ok {
		t.Error("a Workload Kueue has not looked at yet has a word")
	}
	checks := &kueue.Workload{Status: kueue.WorkloadStatus{
		Conditions:      []metav1.Condition{{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionTrue, Reason: "QuotaReserved", LastTransitionTime: at}},
		Admission:       &kueue.Admission{PodSetAssignments: []kueue.PodSetAssignment{{Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"nvidia.com/gpu": "h100"}}}},
		AdmissionChecks: []kueue.AdmissionCheckState{{Name: "prov", State: kueue.CheckStatePending, Message: "waiting for capacity"}},
	}}
	w, ok := wordOf(checks, nil, nil)
	if !ok || w.Never || w.Plain != "Kueue reserved quota on h100 and waits for admission check prov (pending): waiting for capacity" {
		t.Errorf("admission check: %+v", w)
	}
	checks.Status.AdmissionChecks[0].State = kueue.CheckStateRejected
	if w, _ := wordOf(checks, nil, nil); !w.Never || w.Why != "admission check prov rejected it" {
		t.Errorf("rejected admission check: %+v", w)
	}
	inactive := &kueue.Workload{Spec: kueue.WorkloadSpec{Active: ptr.To(false)}}
	if w, ok := wordOf(inactive, nil, nil); !ok || !w.Never || !strings.Contains(w.Why, "deactivated") {
		t.Errorf("inactive: %+v", w)
	}
	evicted := &kueue.Workload{Status: kueue.WorkloadStatus{Conditions: []metav1.Condition{
		{Type: kueue.WorkloadQuotaReserved, Status: metav1.ConditionFalse, Reason: "Preempted", LastTransitionTime: at},
		{Type: kueue.WorkloadEvicted, Status: metav1.ConditionTrue, Reason: kueue.WorkloadEvictedByPreemption, Message: "Preempted to accommodate a workload (UID: x)", LastTransitionTime: at}}}}
	if w, ok := wordOf(evicted, nil, nil); !ok || w.Never || w.Plain != "Kueue evicted it (preempted) and queues it again" || w.Condition != kueue.WorkloadEvicted {
		t.Errorf("evicted: %+v", w)
	}
}

func TestNeverFitsNamesTheFlavor(t *testing.T) {
	cl := &allocator.Cluster{
		Flavors: []allocator.Flavor{{Name: "h100", GPUsPerNode: 8}, {Name: "a100", GPUsPerNode: 8}},
		Nodes:   []allocator.Node{{Name: "n1", Flavor: "h100", GPUs: 8, Rack: "r1"}, {Name: "n2", Flavor: "h100", GPUs: 8, Rack: "r2"}},
		Queues:  []allocator.Queue{{Name: "nlp", Flavors: []string{"h100", "a100"}, Quotas: map[string]allocator.Quota{"h100": {Nominal: 64}, "a100": {Nominal: 64}}}},
	}
	tas := map[string]bool{"h100": true, "a100": true}
	ok, why := neverFits(cl, allocator.Workload{ID: "w", Queue: "nlp", GPUs: 16, Topology: allocator.LevelRack}, tas)
	if ok || why != "no rack of flavor h100 has 16 GPUs (at most 8); flavor a100 has no nodes, and Kueue's topology-aware scheduling admits only onto nodes that exist" {
		t.Errorf("16 GPUs in one rack: %v, %q", ok, why)
	}
	if ok, _ := neverFits(cl, allocator.Workload{ID: "w", Queue: "nlp", GPUs: 16}, tas); !ok {
		t.Error("16 GPUs anywhere fit on the two h100 nodes")
	}
}

func TestParseManagerConfig(t *testing.T) {
	mc, err := parseManagerConfig([]byte(`apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
fairSharing:
  preemptionStrategies: [LessThanOrEqualToFinalShare]
admissionFairSharing:
  usageHalfLifeTime: 168h
  usageSamplingInterval: 5m
waitForPodsReady:
  timeout: 5m
  blockAdmission: true
integrations:
  frameworks: ["pod"]
resources:
  excludeResourcePrefixes: ["mem", "example.com/"]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := managerConfig{fairSharing: true, fsStrategies: []string{"LessThanOrEqualToFinalShare"}, afs: true, afsHalfLife: 168 * time.Hour,
		podsReady: true, blockAdmit: true, readyTimeout: 5 * time.Minute, frameworksJob: false, ignoreMemory: true}
	if diff := cmp.Diff(want, mc, cmp.AllowUnexported(managerConfig{})); diff != "" {
		t.Errorf("parsed (-want +got):\n%s", diff)
	}
	plain, err := parseManagerConfig([]byte("apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"))
	if err != nil || plain.fairSharing || plain.afs || plain.podsReady || !plain.frameworksJob {
		t.Errorf("Kueue's defaults: %+v, %v", plain, err)
	}
	if _, err := parseManagerConfig([]byte("kind: ConfigMap\n")); err == nil {
		t.Error("a ConfigMap parsed as a Configuration")
	}
}

// A workload whose admission the model cannot take (here: on a node that
// went away) is modelled as pending rather than dropped, so that the
// service does not take it for vanished and resubmit it at every sweep.
func TestSnapshotKeepsUnplaceableWorkloads(t *testing.T) {
	v := &view{cluster: allocator.Cluster{
		Flavors: []allocator.Flavor{{Name: "h100", GPUsPerNode: 8}},
		Nodes:   []allocator.Node{{Name: "n1", Flavor: "h100", GPUs: 8}},
		Queues:  []allocator.Queue{{Name: "nlp", Flavors: []string{"h100"}, Quotas: map[string]allocator.Quota{"h100": {Nominal: 8}}}},
	}, workloads: []allocator.Workload{{ID: "r1", Queue: "nlp", GPUs: 8, Flavor: "h100",
		Admission: &allocator.Admission{Flavor: "h100", Nodes: []string{"gone-1"}}}}}
	s, err := v.snapshot(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := s.Workload("r1"); !ok || w.Admission != nil {
		t.Errorf("r1 in the snapshot: %+v, %v; want it there, pending", w, ok)
	}
	if len(v.warnings) != 1 || !strings.Contains(v.warnings[0], "r1 modelled as pending") {
		t.Errorf("warnings = %q", v.warnings)
	}
}
