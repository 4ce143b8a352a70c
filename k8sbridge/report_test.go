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
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/allocator"
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
// the teams it affects, from the ClusterQueues and Kueue's manager
// Configuration; what it models (Fair Sharing, borrowWithinCohort, a
// cohort with a parent) is not.
func TestReportUnmodelledFeatures(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kueue-manager-config", Namespace: "kueue-system"}, Data: map[string]string{
		"controller_manager_config.yaml": "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharing: {}\nwaitForPodsReady:\n  timeout: 5m\n"}}
	f := newFakeWith([]runtime.Object{gpuNode("n1", "r1", 8), cm}, func(cq *kueue.ClusterQueue) {
		cq.Spec.QueueingStrategy = kueue.StrictFIFO
		cq.Spec.Preemption.BorrowWithinCohort = &kueue.BorrowWithinCohort{Policy: kueue.BorrowWithinCohortPolicyLowerPriority}
		cq.Spec.ResourceGroups = append(cq.Spec.ResourceGroups, kueue.ResourceGroup{CoveredResources: []corev1.ResourceName{"cpu", "example.com/licence"},
			Flavors: []kueue.FlavorQuotas{{Name: "default", Resources: []kueue.ResourceQuota{{Name: "cpu", NominalQuota: resource.MustParse("64")},
				{Name: "example.com/licence", NominalQuota: resource.MustParse("4")}}}}})
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
		"StrictFIFO": "ClusterQueue nlp-cq queues StrictFIFO: a workload that does not fit holds back those behind it, where gpubot lets them pass (BestEffortFIFO) [nlp]",
		"CPU or memory in another resource group": "ClusterQueue nlp-cq gives cpu quota in a resource group of its own (other flavors than its GPUs'): gpubot counts CPU and memory only in the GPUs' resource group [nlp]",
		"quota-only flavor":                       "flavor h100 has no Kueue Topology, so Kueue admits there by quota alone (16 GPUs), while gpubot also waits for free GPUs on its nodes (8) [nlp]",
		"waitForPodsReady":                        "Kueue evicts and requeues work whose pods are not all ready in time (waitForPodsReady, timeout 5m0s) []",
	}
	want["quotas on other resources"] = "ClusterQueue nlp-cq also has quotas on example.com/licence: Kueue admits only when those fit too, and gpubot counts GPUs, CPU and memory only [nlp]"
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

// The Kueue settings the allocator models are read into the snapshot:
// CPU and memory quotas of the GPUs' resource group (with their limits),
// borrowWithinCohort, flavorFungibility, fair-sharing weights (Kueue's 0
// is ZeroWeight), the Cohort objects (parent, quota, weight), Fair
// Sharing and its strategies from the manager Configuration, what the
// pods ask for and what the nodes have.
func TestSnapshotModelsKueueSettings(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kueue-manager-config", Namespace: "kueue-system"}, Data: map[string]string{
		"controller_manager_config.yaml": "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nfairSharing:\n  preemptionStrategies: [LessThanInitialShare]\n"}}
	node := gpuNode("n1", "r1", 8)
	node.Status.Allocatable["cpu"] = resource.MustParse("96")
	node.Status.Allocatable["memory"] = resource.MustParse("1Ti")
	wl := fakeWorkload("team-nlp", "w", 2, 4, nil)
	wl.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Requests["cpu"] = resource.MustParse("12")
	wl.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"memory": resource.MustParse("64Gi")}
	wl.Spec.PodSets[0].Template.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"cpu": resource.MustParse("16")}}}}
	f := newFakeWith([]runtime.Object{node, cm}, func(cq *kueue.ClusterQueue) {
		cq.Spec.Preemption.ReclaimWithinCohort = kueue.PreemptionPolicyAny
		cq.Spec.Preemption.BorrowWithinCohort = &kueue.BorrowWithinCohort{Policy: kueue.BorrowWithinCohortPolicyLowerPriority, MaxPriorityThreshold: ptr.To[int32](100)}
		cq.Spec.FlavorFungibility = &kueue.FlavorFungibility{WhenCanBorrow: kueue.TryNextFlavor, WhenCanPreempt: kueue.TryNextFlavor,
			Preference: ptr.To(kueue.PreemptionOverBorrowing)}
		cq.Spec.FairSharing = &kueue.FairSharing{Weight: ptr.To(resource.MustParse("0"))}
		rg := &cq.Spec.ResourceGroups[0]
		rg.CoveredResources = append(rg.CoveredResources, "cpu", "memory")
		rg.Flavors[0].Resources = append(rg.Flavors[0].Resources,
			kueue.ResourceQuota{Name: "cpu", NominalQuota: resource.MustParse("64"), LendingLimit: ptr.To(resource.MustParse("500m"))},
			kueue.ResourceQuota{Name: "memory", NominalQuota: resource.MustParse("512Gi")})
	}, wl,
		&kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "research"}, Spec: kueue.CohortSpec{ParentName: "org",
			FairSharing: &kueue.FairSharing{Weight: ptr.To(resource.MustParse("2"))},
			ResourceGroups: []kueue.ResourceGroup{{CoveredResources: []corev1.ResourceName{"nvidia.com/gpu", "cpu"}, Flavors: []kueue.FlavorQuotas{{Name: "h100",
				Resources: []kueue.ResourceQuota{{Name: "nvidia.com/gpu", NominalQuota: resource.MustParse("4"), BorrowingLimit: ptr.To(resource.MustParse("2"))},
					{Name: "cpu", NominalQuota: resource.MustParse("32")}}}}}}}},
		&kueue.Cohort{ObjectMeta: metav1.ObjectMeta{Name: "org"}})
	b, _ := startFake(t, f)
	snap, err := b.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c := snap.Cluster()
	wantQ := []allocator.Queue{{Name: "nlp", Cohort: "research", Flavors: []string{"h100"}, Weight: allocator.ZeroWeight,
		Quotas: map[string]allocator.Quota{"h100": {Nominal: 16, BorrowingLimit: ptr.To(8),
			CPU:    &allocator.ResourceQuota{Nominal: 64000, LendingLimit: ptr.To[int64](500)},
			Memory: &allocator.ResourceQuota{Nominal: 512 << 30}}},
		Preemption: allocator.Preemption{WithinClusterQueue: "LowerPriority", ReclaimWithinCohort: "Any",
			BorrowWithinCohort: "LowerPriority", BorrowWithinCohortMaxPriority: ptr.To[int32](100)},
		FlavorFungibility: allocator.FlavorFungibility{WhenCanBorrow: "TryNextFlavor", WhenCanPreempt: "TryNextFlavor", Preference: "PreemptionOverBorrowing"}}}
	if d := cmp.Diff(wantQ, c.Queues); d != "" {
		t.Errorf("queues (-want +got):\n%s", d)
	}
	wantC := []allocator.Cohort{{Name: "org", Weight: 1, Quotas: map[string]allocator.Quota{}},
		{Name: "research", Parent: "org", Weight: 2, Quotas: map[string]allocator.Quota{"h100": {Nominal: 4, BorrowingLimit: ptr.To(2),
			CPU: &allocator.ResourceQuota{Nominal: 32000}}}}}
	if d := cmp.Diff(wantC, c.Cohorts); d != "" {
		t.Errorf("cohorts (-want +got):\n%s", d)
	}
	if fs := c.Policy.FairSharing; fs == nil || !cmp.Equal(fs.PreemptionStrategies, []string{"LessThanInitialShare"}) {
		t.Errorf("fair sharing %+v, want LessThanInitialShare", fs)
	}
	if n := c.Nodes[0]; n.CPU != 96000 || n.Memory != 1<<40 {
		t.Errorf("node %+v, want 96 cores, 1Ti", n)
	}
	// Two pods of 12 cores (the init container's 16 is more): 32 cores;
	// the memory limit stands for the request: 128Gi.
	w, ok := snap.Workload("k8s/team-nlp/w")
	if !ok || w.CPU != 32000 || w.Memory != 128<<30 {
		t.Errorf("workload %+v, want 32 cores and 128Gi", w)
	}
	rep, err := b.KueueReport(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range rep.Approximate {
		if u.Feature != "quota-only flavor" {
			t.Errorf("%s flagged as not modelled: %s", u.Feature, u.Detail)
		}
	}
}

// Kueue's resources.excludeResourcePrefixes drops the resources it names
// from what Kueue counts of a workload (dropExcludedResources, by
// prefix): "mem" leaves the workload's memory out, its CPU counts.
func TestSnapshotExcludedResources(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kueue-manager-config", Namespace: "kueue-system"}, Data: map[string]string{
		"controller_manager_config.yaml": "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nresources:\n  excludeResourcePrefixes: [mem]\n"}}
	wl := fakeWorkload("team-nlp", "w", 2, 4, nil)
	wl.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Requests["cpu"] = resource.MustParse("12")
	wl.Spec.PodSets[0].Template.Spec.Containers[0].Resources.Requests["memory"] = resource.MustParse("64Gi")
	f := newFakeWith([]runtime.Object{gpuNode("n1", "r1", 8), cm}, func(cq *kueue.ClusterQueue) {
		rg := &cq.Spec.ResourceGroups[0]
		rg.CoveredResources = append(rg.CoveredResources, "cpu")
		rg.Flavors[0].Resources = append(rg.Flavors[0].Resources, kueue.ResourceQuota{Name: "cpu", NominalQuota: resource.MustParse("64")})
	}, wl)
	b, _ := startFake(t, f)
	snap, err := b.Snapshot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := snap.Workload("k8s/team-nlp/w"); !ok || w.CPU != 24000 || w.Memory != 0 {
		t.Errorf("workload %+v, want 24 cores and no memory", w)
	}
}
