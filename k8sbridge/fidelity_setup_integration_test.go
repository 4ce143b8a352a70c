package k8sbridge_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/k8sbridge"
	"github.com/gpubot/gpubot/k8sbridge/k8senv"
)

// Fidelity scenarios on Kueue setups written by gpubot kueue-setup (the
// shipped one, and one for the NVIDIA GPU operator's labels), and on
// ClusterQueues with admission checks or stopped.

// wantApproximate checks that the bridge lists feature as not modelled
// for team.
func (f *fidelity) wantApproximate(feature, team string) {
	f.t.Helper()
	rep, err := f.bridge.KueueReport(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, u := range rep.Approximate {
		if u.Feature == feature && (len(u.Queues) == 0 || slices.Contains(u.Queues, team)) {
			return
		}
	}
	f.t.Errorf("the bridge does not say that %s's estimates are approximate for %s: %+v", team, feature, rep.Approximate)
}

// wantFlavorNodes checks the nodes the bridge reports for flavor.
func (f *fidelity) wantFlavorNodes(flavor string, nodes int) {
	f.t.Helper()
	rep, err := f.bridge.KueueReport(f.ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, fn := range rep.Flavors {
		if fn.Flavor == f.n(flavor) {
			if fn.Nodes != nodes || fn.GPUs != 8*nodes {
				f.t.Errorf("flavor %s has %d nodes and %d GPUs; want %d nodes", flavor, fn.Nodes, fn.GPUs, nodes)
			}
			return
		}
	}
	f.t.Errorf("no flavor %s in the report", flavor)
}

// TestFidelityExampleSetup runs the shipped Kueue setup
// (deploy/kueue/setup.yaml, written by gpubot kueue-setup from the
// bundled example) on kwok nodes laid out as the example's simulated
// cluster, with GKE's labels, through flavor order, borrowing limits,
// the cohort's lending limits and reclaim.
func TestFidelityExampleSetup(t *testing.T) {
	t.Parallel()
	s := newScenario(t, nil)
	if _, err := k8senv.ApplyFile(s.ctx, env.Config, filepath.Join("..", "deploy", "kueue", "setup.yaml"), ""); err != nil {
		t.Fatal(err)
	}
	var nodes []k8senv.FakeNode
	for _, fl := range []struct {
		name, accel  string
		blocks, each int
	}{{"h100", "nvidia-h100-80gb", 2, 4}, {"a100", "nvidia-a100-80gb", 1, 4}} {
		for b := 1; b <= fl.blocks; b++ {
			for r := 1; r <= 2; r++ {
				for n := 1; n <= fl.each; n++ {
					name := fmt.Sprintf("%s-b%d-r%d-n%d", fl.name, b, r, n)
					nodes = append(nodes, k8senv.FakeNode{Name: name, GPUs: 8, Labels: map[string]string{
						k8sbridge.LabelGKEAccelerator:            fl.accel,
						"cloud.google.com/gce-topology-block":    fmt.Sprintf("%s-b%d", fl.name, b),
						"cloud.google.com/gce-topology-subblock": fmt.Sprintf("%s-b%d-r%d", fl.name, b, r)}})
				}
			}
		}
	}
	s.createNodes(nodes)
	s.cfg = k8sbridge.Config{
		Teams: []k8sbridge.Team{{Name: "nlp"}, {Name: "vision"}, {Name: "speech"}},
		// As the app configures the bridge from the example: its elastic
		// flavors are marked, so work that asks for any flavor is kept off
		// them (the shipped ClusterQueues list them after the reserved ones).
		Flavors: []allocator.Flavor{{Name: "h100", GPUsPerNode: 8}, {Name: "a100", GPUsPerNode: 8},
			{Name: "h100-spot", GPUsPerNode: 8, Elastic: true}, {Name: "h100-dws", GPUsPerNode: 8, Elastic: true}},
		Priorities: map[string]int32{"low": 100, "normal": 200, "high": 500, "urgent": 1000},
		Templates:  keepRunning,
	}
	s.start()
	f := &fidelity{scenario: s, pending: map[string]allocator.Workload{}}
	f.eventually("24 example nodes in the snapshot", func() bool {
		snap, err := s.bridge.Snapshot(s.ctx)
		if err != nil {
			return false
		}
		n := 0
		for _, node := range snap.Cluster().Nodes {
			if node.Flavor == "h100" || node.Flavor == "a100" {
				n++
			}
		}
		return n == 24
	})
	f.run(
		act{submit: f.wl("f1", "speech", 24, normal), want: "f1=a100"},                                 // speech tries a100 first
		act{submit: f.wl("f2", "nlp", 64, normal), want: "f1=a100 f2=h100"},                            // nlp's nominal h100
		act{submit: f.wl("f3", "vision", 48, normal), want: "f1=a100 f2=h100 f3=h100"},                 // vision's nominal h100
		act{submit: f.wl("f4", "nlp", 32, normal), want: "f1=a100 f2=h100 f3=h100 f4=a100"},            // h100: the pool lends only 16
		act{submit: f.wl("f5", "vision", 16, normal), want: "f1=a100 f2=h100 f3=h100 f4=a100 f5=h100"}, // the last 16 h100, borrowed
		// speech reclaims its h100 quota from vision's borrowed f5; f5,
		// requeued, reclaims vision's a100 quota from nlp's borrowing f4.
		act{submit: f.wl("f6", "speech", 16, normal), want: "f1=a100 f2=h100 f3=h100 f4=pending f5=a100 f6=h100 | preempted f4 f5"},
		act{release: "f2", want: "f1=a100 f3=h100 f4=h100 f5=a100 f6=h100"},
	)
}

var keepRunning = map[string][]byte{"": []byte(k8sbridge.DefaultJobTemplate + `    metadata:
      annotations:
        pod-complete.stage.kwok.x-k8s.io/delay: 1h
        pod-complete.stage.kwok.x-k8s.io/jitter-delay: 1h
`)}

// createNodes creates kwok nodes, deleted at the end of the test, and
// waits until they are ready.
func (s *scenario) createNodes(nodes []k8senv.FakeNode) {
	s.t.Helper()
	if err := k8senv.CreateFakeNodes(s.ctx, s.kube, nodes); err != nil {
		s.t.Fatal(err)
	}
	for _, n := range nodes {
		s.t.Cleanup(func() { _ = s.kube.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{}) })
	}
	if err := k8senv.WaitNodesReady(s.ctx, s.kube, len(nodes)); err != nil {
		s.t.Fatal(err)
	}
}

// On nodes labelled by the NVIDIA GPU operator (nvidia.com/gpu.product),
// a setup written for kubernetes.acceleratorLabel nvidia.com/gpu.product
// selects them; nodes of another product are reported as matching no
// flavor and not counted.
func TestFidelityGPUOperatorLabels(t *testing.T) {
	t.Parallel()
	s := newScenario(t, nil)
	h100, h200 := "NVIDIA-H100-80GB-HBM3-"+s.p, "NVIDIA-H200-"+s.p
	setup := k8sbridge.Setup(k8sbridge.SetupSpec{
		GPUResource: "nvidia.com/gpu", AcceleratorLabel: k8sbridge.LabelGPUProduct,
		TopologyLevels: []string{"cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock", "kubernetes.io/hostname"},
		Flavors:        []k8sbridge.SetupFlavor{{Name: s.n("h100"), NodeLabels: map[string]string{k8sbridge.LabelGPUProduct: h100}}},
		Teams: []k8sbridge.SetupTeam{{Queue: allocator.Queue{Name: s.n("nlp"), Flavors: []string{s.n("h100")},
			Quotas: map[string]allocator.Quota{s.n("h100"): {Nominal: 16}}}}},
	})
	if _, err := k8senv.Apply(s.ctx, env.Config, setup, ""); err != nil {
		t.Fatal(err)
	}
	var nodes []k8senv.FakeNode
	for i, product := range []string{h100, h100, h200, h200, h200, h200} {
		nodes = append(nodes, k8senv.FakeNode{Name: fmt.Sprintf("%s-gpu-%d", s.p, i+1), GPUs: 8, Labels: map[string]string{
			k8sbridge.LabelGPUProduct: product, "cloud.google.com/gce-topology-block": s.p + "-b1", "cloud.google.com/gce-topology-subblock": s.p + "-r1"}})
	}
	s.createNodes(nodes)
	s.cfg = k8sbridge.Config{Teams: []k8sbridge.Team{{Name: s.n("nlp")}}, Flavors: []allocator.Flavor{{Name: s.n("h100"), GPUsPerNode: 8}},
		Priorities: priorities, Templates: keepRunning, AcceleratorLabel: k8sbridge.LabelGPUProduct,
		FlavorLabels: map[string]map[string]string{s.n("h100"): {k8sbridge.LabelGPUProduct: h100}}}
	s.start()
	f := &fidelity{scenario: s, pending: map[string]allocator.Workload{}}
	f.waitNodes(2)
	f.run(
		act{submit: f.wl("r1", s.n("nlp"), 16, normal), want: "r1=h100"},
		act{submit: f.wl("r2", s.n("nlp"), 8, normal), want: "r1=h100 r2=pending"},
	)
	f.wantFlavorNodes("h100", 2)
	rep, err := f.bridge.KueueReport(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("4 GPU nodes match no ResourceFlavor: labels %s=%s (", k8sbridge.LabelGPUProduct, h200)
	if !slices.ContainsFunc(rep.Unmatched, func(u string) bool { return strings.HasPrefix(u, want) }) {
		t.Errorf("unmatched nodes %q; want one starting %q", rep.Unmatched, want)
	}
	for _, w := range f.bridge.Warnings() {
		if strings.Contains(w, s.p) {
			t.Errorf("warning: %s", w)
		}
	}
}

// Admission checks: Kueue reserves quota and admits only when the check
// is ready; in between gpubot shows Kueue's word (waiting for the check)
// and says its estimates for the team are approximate.
func TestFidelityKnownAdmissionCheck(t *testing.T) {
	t.Parallel()
	s := newScenario(t, nil)
	check := s.n("check")
	ac := &kueue.AdmissionCheck{ObjectMeta: metav1.ObjectMeta{Name: check}, Spec: kueue.AdmissionCheckSpec{ControllerName: "gpubot.io/test-check"}}
	s.must(s.kueue.KueueV1beta2().AdmissionChecks().Create(s.ctx, ac, metav1.CreateOptions{}))
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got, err := s.kueue.KueueV1beta2().AdmissionChecks().Get(s.ctx, check, metav1.GetOptions{})
		if err != nil {
			return err
		}
		apimeta.SetStatusCondition(&got.Status.Conditions, metav1.Condition{Type: kueue.AdmissionCheckActive, Status: metav1.ConditionTrue, Reason: "Active", Message: "the test is its controller"})
		_, err = s.kueue.KueueV1beta2().AdmissionChecks().UpdateStatus(s.ctx, got, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s.t.Cleanup(func() {
		_ = s.kueue.KueueV1beta2().AdmissionChecks().Delete(context.Background(), check, metav1.DeleteOptions{})
	})
	f := s.fidelityOn(h100x1, teamSpec{name: "nlp", quotas: []flavorQuota{q("h100", 8)}, mutate: func(cq *kueue.ClusterQueueSpec) {
		cq.AdmissionChecksStrategy = &kueue.AdmissionChecksStrategy{AdmissionChecks: []kueue.AdmissionCheckStrategyRule{{Name: kueue.AdmissionCheckReference(check)}}}
	}})
	f.run(act{submit: f.wl("r1", "nlp", 8, normal), want: "r1=reserved:h100", known: "r1=h100"})
	rep, err := f.bridge.KueueReport(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if w := rep.Pending["r1"]; w.Never || !strings.HasPrefix(w.Plain, "Kueue reserved quota on "+s.n("h100")+" and waits for admission check "+check+" (pending)") {
		t.Errorf("Kueue's word on r1: %+v", w)
	}
	f.wantApproximate("admission checks", "nlp")
	f.run(act{then: func(f *fidelity) { f.checkReady("r1", check) }, want: "r1=h100"})
}

// checkReady plays the admission check's controller: the check is ready.
func (f *fidelity) checkReady(id, check string) {
	f.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		wl := f.workloadOf(id)
		if wl == nil {
			return fmt.Errorf("%s has no Workload", id)
		}
		found := false
		for i := range wl.Status.AdmissionChecks {
			if string(wl.Status.AdmissionChecks[i].Name) == check {
				wl.Status.AdmissionChecks[i].State = kueue.CheckStateReady
				wl.Status.AdmissionChecks[i].Message = "ready"
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s's Workload has no check %s", id, check)
		}
		_, err := f.kueue.KueueV1beta2().Workloads(wl.Namespace).UpdateStatus(f.ctx, wl, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

// A stopped ClusterQueue: Kueue admits nothing from it, and gpubot says
// the request will not start as it is (Kueue's word, since the
// allocator does not model stopPolicy); started again, Kueue admits.
func TestFidelityKnownStoppedClusterQueue(t *testing.T) {
	t.Parallel()
	s := newScenario(t, nil)
	f := s.fidelityOn(h100x1, teamSpec{name: "nlp", quotas: []flavorQuota{q("h100", 8)}, inactive: true,
		mutate: func(cq *kueue.ClusterQueueSpec) { cq.StopPolicy = ptr.To(kueue.Hold) }})
	f.run(act{submit: f.wl("r1", "nlp", 8, normal), want: "r1=never", known: "r1=h100"})
	f.wantApproximate("stopPolicy", "nlp")
	f.run(act{then: func(f *fidelity) {
		patch := []byte(`{"spec":{"stopPolicy":"None"}}`)
		if _, err := f.kueue.KueueV1beta2().ClusterQueues().Patch(f.ctx, f.n("nlp"), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			f.t.Fatal(err)
		}
	}, want: "r1=h100"})
}

// fidelityOn is newFidelity for a scenario already made (and marked
// parallel).
func (s *scenario) fidelityOn(flavors []flavorSpec, teams ...teamSpec) *fidelity {
	s.t.Helper()
	return newFidelityOn(s, flavors, teams...)
}
