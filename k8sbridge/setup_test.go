package k8sbridge_test

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	"sigs.k8s.io/yaml"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/k8sbridge"
)

// Setup writes valid Kueue objects: every document decodes strictly into
// its Kueue type (an unknown or misspelt field fails), with the quotas,
// limits, preemption, flavor order and node labels of the spec. (The
// integration tests apply the shipped one to the real API server and
// Kueue.)
func TestSetupWritesTheKueueObjects(t *testing.T) {
	eight, four := 8, 4
	spec := k8sbridge.SetupSpec{
		Source: "test.yaml", GPUResource: "nvidia.com/gpu", AcceleratorLabel: "nvidia.com/gpu.product",
		TopologyLevels: []string{"rack.example.com/block", "rack.example.com/rack", "kubernetes.io/hostname"},
		Flavors: []k8sbridge.SetupFlavor{
			{Name: "h100", NodeLabels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
			{Name: "h100-spot", NodeLabels: map[string]string{"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "cloud.google.com/gke-spot": "true"}},
			{Name: "l4"},
		},
		Priorities: []k8sbridge.SetupPriority{{Name: "high", Value: 500}, {Name: "low", Value: 100}},
		Teams: []k8sbridge.SetupTeam{
			{Namespace: "team-nlp", LocalQueue: "nlp-q", Queue: allocator.Queue{Name: "nlp", Cohort: "pool", Flavors: []string{"h100-spot", "h100"},
				Quotas:     map[string]allocator.Quota{"h100": {Nominal: 16, BorrowingLimit: &eight, LendingLimit: &four}, "h100-spot": {Nominal: 8}},
				Preemption: allocator.Preemption{WithinClusterQueue: "LowerPriority", ReclaimWithinCohort: "Any"}}},
			{Queue: allocator.Queue{Name: "solo", Flavors: []string{"l4"}, Quotas: map[string]allocator.Quota{"l4": {Nominal: 4, BorrowingLimit: &eight}}}},
		},
		FairSharing: true,
	}
	out := k8sbridge.Setup(spec)
	if !strings.Contains(string(out), "admission.mode is AdmissionFairSharing") || !strings.Contains(string(out), "# fairSharing:") {
		t.Errorf("the notes on fair sharing and the manager Configuration are missing:\n%s", out)
	}
	kinds := map[string]int{}
	var cqs []kueue.ClusterQueue
	var rfs []kueue.ResourceFlavor
	r := utilyaml.NewYAMLReader(bufioReader(out))
	for {
		doc, err := r.Read()
		if err != nil {
			break
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil || meta.Kind == "" {
			continue // the comments at the end
		}
		kinds[meta.Kind]++
		var obj any
		switch meta.Kind {
		case "ClusterQueue":
			cqs = append(cqs, kueue.ClusterQueue{})
			obj = &cqs[len(cqs)-1]
		case "ResourceFlavor":
			rfs = append(rfs, kueue.ResourceFlavor{})
			obj = &rfs[len(rfs)-1]
		case "Topology":
			obj = &kueue.Topology{}
		case "Cohort":
			obj = &kueue.Cohort{}
		case "WorkloadPriorityClass":
			obj = &kueue.WorkloadPriorityClass{}
		case "LocalQueue":
			obj = &kueue.LocalQueue{}
		case "Namespace":
			obj = &corev1.Namespace{}
		default:
			t.Fatalf("unexpected kind %s", meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Errorf("%s does not decode strictly: %v\n%s", meta.Kind, err, doc)
		}
	}
	if d := cmp.Diff(map[string]int{"Topology": 1, "ResourceFlavor": 3, "Cohort": 1, "WorkloadPriorityClass": 2, "Namespace": 2, "ClusterQueue": 2, "LocalQueue": 2}, kinds); d != "" {
		t.Errorf("kinds (-want +got):\n%s", d)
	}
	if got := rfs[1].Spec.NodeLabels["cloud.google.com/gke-spot"]; got != "true" || *rfs[1].Spec.TopologyName != "gpu-topology" {
		t.Errorf("spot flavor: %+v", rfs[1].Spec)
	}
	if got := rfs[2].Spec.NodeLabels; !cmp.Equal(got, map[string]string{"nvidia.com/gpu.product": "l4"}) {
		t.Errorf("a flavor without labels selects %v; want the accelerator label with its name", got)
	}
	nlp := cqs[0].Spec
	fq := nlp.ResourceGroups[0].Flavors
	if fq[0].Name != "h100-spot" || fq[1].Name != "h100" {
		t.Errorf("flavor order %v; want the team's order", fq)
	}
	h := fq[1].Resources[0]
	if h.NominalQuota.Cmp(resource.MustParse("16")) != 0 || h.BorrowingLimit.Cmp(resource.MustParse("8")) != 0 || h.LendingLimit.Cmp(resource.MustParse("4")) != 0 {
		t.Errorf("h100 quota %+v", h)
	}
	if nlp.CohortName != "pool" || nlp.QueueingStrategy != kueue.BestEffortFIFO || nlp.Preemption.ReclaimWithinCohort != kueue.PreemptionPolicyAny ||
		nlp.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "team-nlp" {
		t.Errorf("nlp's ClusterQueue %+v", nlp)
	}
	if solo := cqs[1].Spec.ResourceGroups[0].Flavors[0].Resources[0]; solo.BorrowingLimit != nil {
		t.Error("a borrowing limit written for a team without a cohort (Kueue rejects it)")
	}
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }

// Setup writes what the allocator models beyond GPU quotas: Cohort
// objects with a parent, quota and weight; CPU and memory in the GPUs'
// resource group; borrowWithinCohort; flavorFungibility; fair-sharing
// weights; and, with Kueue's Fair Sharing, the manager Configuration it
// needs.
func TestSetupWritesKueueSettings(t *testing.T) {
	two, mx := 2, int32(100)
	cpu := func(c int64) *allocator.ResourceQuota { return &allocator.ResourceQuota{Nominal: c * 1000} }
	spec := k8sbridge.SetupSpec{
		Source: "test.yaml", GPUResource: "nvidia.com/gpu",
		Flavors: []k8sbridge.SetupFlavor{{Name: "h100", NodeLabels: map[string]string{"a": "b"}}},
		Cohorts: []allocator.Cohort{{Name: "research", Parent: "org", Weight: 0.5, Quotas: map[string]allocator.Quota{"h100": {Nominal: 4, LendingLimit: &two, CPU: cpu(48)}}}},
		Teams: []k8sbridge.SetupTeam{{Queue: allocator.Queue{Name: "nlp", Cohort: "research", Flavors: []string{"h100"}, Weight: allocator.ZeroWeight,
			Quotas:            map[string]allocator.Quota{"h100": {Nominal: 8, CPU: cpu(96), Memory: &allocator.ResourceQuota{Nominal: 768 << 30}}},
			Preemption:        allocator.Preemption{ReclaimWithinCohort: "Any", BorrowWithinCohort: "LowerPriority", BorrowWithinCohortMaxPriority: &mx},
			FlavorFungibility: allocator.FlavorFungibility{WhenCanBorrow: "TryNextFlavor"}}}},
		KueueFairSharing: &allocator.KueueFairSharing{PreemptionStrategies: []string{"LessThanInitialShare"}},
	}
	out := k8sbridge.Setup(spec)
	if !strings.Contains(string(out), "#   fairSharing:\n#     preemptionStrategies: [LessThanInitialShare]") {
		t.Errorf("the manager Configuration's fairSharing is not in the notes:\n%s", out)
	}
	cohorts := map[string]kueue.Cohort{}
	var cq kueue.ClusterQueue
	r := utilyaml.NewYAMLReader(bufioReader(out))
	for {
		doc, err := r.Read()
		if err != nil {
			break
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			continue
		}
		switch meta.Kind {
		case "Cohort":
			var c kueue.Cohort
			if err := yaml.UnmarshalStrict(doc, &c); err != nil {
				t.Fatalf("Cohort: %v\n%s", err, doc)
			}
			cohorts[c.Name] = c
		case "ClusterQueue":
			if err := yaml.UnmarshalStrict(doc, &cq); err != nil {
				t.Fatalf("ClusterQueue: %v\n%s", err, doc)
			}
		}
	}
	res := cohorts["research"].Spec
	if _, ok := cohorts["org"]; !ok || res.ParentName != "org" || res.FairSharing.Weight.String() != "500m" {
		t.Errorf("cohorts %+v", cohorts)
	}
	if rg := res.ResourceGroups[0]; !cmp.Equal(rg.CoveredResources, []corev1.ResourceName{"nvidia.com/gpu", "cpu"}) ||
		rg.Flavors[0].Resources[0].LendingLimit.Value() != 2 || rg.Flavors[0].Resources[1].NominalQuota.Value() != 48 {
		t.Errorf("research's resource group %+v", rg)
	}
	s := cq.Spec
	if rg := s.ResourceGroups[0]; !cmp.Equal(rg.CoveredResources, []corev1.ResourceName{"nvidia.com/gpu", "cpu", "memory"}) ||
		rg.Flavors[0].Resources[1].NominalQuota.Value() != 96 || rg.Flavors[0].Resources[2].NominalQuota.String() != "768Gi" {
		t.Errorf("nlp's resource group %+v", rg)
	}
	if bw := s.Preemption.BorrowWithinCohort; bw == nil || bw.Policy != kueue.BorrowWithinCohortPolicyLowerPriority || *bw.MaxPriorityThreshold != 100 {
		t.Errorf("borrowWithinCohort %+v", bw)
	}
	if ff := s.FlavorFungibility; ff == nil || ff.WhenCanBorrow != kueue.TryNextFlavor || ff.WhenCanPreempt != kueue.TryNextFlavor {
		t.Errorf("flavorFungibility %+v", ff)
	}
	if w := s.FairSharing; w == nil || !w.Weight.IsZero() {
		t.Errorf("a weight of 0 written as %+v", w)
	}
}
