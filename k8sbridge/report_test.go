package k8sbridge_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/k8sbridge"
)

func labelled(n *corev1.Node, labels map[string]string) *corev1.Node {
	n.Labels = labels
	n.Labels["kubernetes.io/hostname"] = n.Name
	return n
}

// GPU nodes that no ResourceFlavor selects are described with their
// accelerator labels and what the flavors select; capacity counts only
// the nodes a flavor selects.
func TestReportUnmatchedNodes(t *testing.T) {
	var nodes []runtime.Object
	for _, name := range []string{"h200-1", "h200-2", "h200-3", "h200-4"} {
		nodes = append(nodes, labelled(gpuNode(name, "r1", 8), map[string]string{"nvidia.com/gpu.product": "NVIDIA-H200"}))
	}
	nodes = append(nodes, gpuNode("h100-1", "r1", 8))
	b, _ := startFake(t, newFake(nodes, nil))
	rep, err := b.KueueReport(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"4 GPU nodes match no ResourceFlavor: labels nvidia.com/gpu.product=NVIDIA-H200 (h200-1, h200-2, …); the flavors select accel=h100 (h100)"}
	if diff := cmp.Diff(want, rep.Unmatched); diff != "" {
		t.Errorf("unmatched (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]commands.FlavorNodes{{Flavor: "h100", Nodes: 1, GPUs: 8, Selects: "accel=h100"}}, rep.Flavors); diff != "" {
		t.Errorf("flavors (-want +got):\n%s", diff)
	}
	snap, err := b.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if caps := snap.Capacity(nil); len(caps) != 1 || caps[0].Total != 8 {
		t.Errorf("capacity %+v; want 8 GPUs of h100 only, from the cluster", caps)
	}
}

// What the cluster uses that the allocator does not model is listed for
// the teams it affects, from the ClusterQueues, the cohort tree and
// Kueue's manager Configuration.
func TestReportUnmodelledFeatures(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kueue-manager-config", Namespace: "kueue-system"}, Data: map[string]string{
		"controller_manager_config.yaml": "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharing: {}\nwaitForPodsReady:\n  timeout: 5m\n"}}
	f := newFakeWith([]runtime.Object{gpuNode("n1", "r1", 8), cm}, func(cq *kueue.ClusterQueue) {
		cq.Spec.QueueingStrategy = kueue.StrictFIFO
		cq.Spec.Preemption.BorrowWithinCohort = &kueue.BorrowWithinCohort{Policy: kueue.BorrowWithinCohortPolicyLowerPriority}
		cq.Spec.ResourceGroups = append(cq.Spec.ResourceGroups, kueue.ResourceGroup{CoveredResources: []corev1.ResourceName{"cpu"},
			Flavors: []kueue.FlavorQuotas{{Name: "h100", Resources: []kueue.ResourceQuota{{Name: "cpu", NominalQuota: resource.MustParse("64")}}}}})
	}, &kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "research"}, Spec: kueue.CohortSpec{ParentName: "org"}})
	b, _ := startFake(t, f)
	rep, err := b.KueueReport(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, u := range rep.Approximate {
		got[u.Feature] = u.Detail + " [" + strings.Join(u.Queues, ",") + "]"
	}
	want := map[string]string{
		"StrictFIFO":                "ClusterQueue nlp-cq queues StrictFIFO: a workload that does not fit holds back those behind it, where gpubot lets them pass (BestEffortFIFO) [nlp]",
		"borrowWithinCohort":        "ClusterQueue nlp-cq may preempt lower-priority work in its cohort while borrowing (borrowWithinCohort LowerPriority) [nlp]",
		"quotas on other resources": "ClusterQueue nlp-cq also has quotas on cpu: Kueue admits only when those fit too, and gpubot counts GPUs only [nlp]",
		"hierarchical cohorts":      "cohort research has parent cohort org: Kueue lends and borrows across the tree, gpubot only within one cohort [nlp]",
		"quota-only flavor":         "flavor h100 has no Kueue Topology, so Kueue admits there by quota alone (16 GPUs), while gpubot also waits for free GPUs on its nodes (8) [nlp]",
		"Fair Sharing":              "Kueue's Fair Sharing orders the ClusterQueues of a cohort by their share of what they borrow, and preempts to even the shares [nlp]",
		"waitForPodsReady":          "Kueue evicts and requeues work whose pods are not all ready in time (waitForPodsReady, timeout 5m0s) []",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("unmodelled (-want +got):\n%s", diff)
	}
	for _, w := range b.Warnings() {
		if strings.Contains(w, "manager Configuration") {
			t.Errorf("warning %q although the Configuration was read", w)
		}
	}
}

// Without Kueue's ConfigMap gpubot says so and assumes Kueue's defaults;
// an AdmissionFairSharing configuration is answered with what Kueue does.
func TestWarningsAboutKueueConfiguration(t *testing.T) {
	cfg := fakeConfig()
	cfg.Policy.Mode = "AdmissionFairSharing"
	cfg.FlavorLabels = map[string]map[string]string{"h100": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}
	f := newFake([]runtime.Object{gpuNode("n1", "r1", 8)}, nil)
	b, err := k8sbridge.New(cfg, f.kube, f.kueue)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	warnings, err := b.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(warnings, "\n")
	for _, want := range []string{
		"admission.mode is AdmissionFairSharing, but Kueue orders the teams' ClusterQueues by priority, then arrival",
		"Kueue's manager Configuration: reading ConfigMap kueue-system/kueue-manager-config: ",
		"assumes Kueue's defaults",
		"flavor h100: the ResourceFlavor selects nodes with accel=h100, the configuration says nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings lack %q:\n%s", want, all)
		}
	}
	snap, err := b.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m := snap.Cluster().Policy.Mode; m != "BestEffortFIFO" {
		t.Errorf("the allocator orders by %s on a cluster; want BestEffortFIFO, as Kueue", m)
	}

}
