package k8senv

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/gpubot/gpubot/allocator"
)

// FakeNode is a GPU node that kwok keeps ready and whose pods it runs.
type FakeNode struct {
	Name   string
	GPUs   int
	Labels map[string]string
	// Taints are set on the node as created (spot and provisioned nodes
	// carry NoSchedule taints that only their flavor's work tolerates).
	Taints []corev1.Taint
}

// CreateFakeNodes creates the nodes, managed by the kwok that Start runs
// with Options.Nodes, with their GPUs as nvidia.com/gpu.
func CreateFakeNodes(ctx context.Context, kube kubernetes.Interface, nodes []FakeNode) error {
	for _, n := range nodes {
		labels := map[string]string{"kubernetes.io/hostname": n.Name, "type": "kwok"}
		for k, v := range n.Labels {
			labels[k] = v
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}}, Spec: corev1.NodeSpec{Taints: n.Taints}}
		if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating node %s: %w", n.Name, err)
		}
		alloc := corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(int64(n.GPUs), resource.DecimalSI),
			"cpu": resource.MustParse("96"), "memory": resource.MustParse("1Ti"), "pods": resource.MustParse("110")}
		// kwok updates a new node at once too: retry on conflicts.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got, err := kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			got.Status.Capacity, got.Status.Allocatable = alloc, alloc
			_, err = kube.CoreV1().Nodes().UpdateStatus(ctx, got, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("setting node %s's capacity: %w", n.Name, err)
		}
	}
	return nil
}

// Example applies a Kueue setup (such as deploy/kueue/setup.yaml) and
// creates fake nodes for the given simulated nodes, labelled with their
// flavor's node labels and GKE's block and sub-block labels, so that the
// cluster matches a gpubot configuration's simulated cluster; a flavor
// whose ResourceFlavor tolerates taints (an elastic one) has its nodes
// tainted with them. It returns once the nodes are ready (WaitNodesReady)
// and Kueue has made every ClusterQueue active (WaitClusterQueuesActive).
func (e *Env) Example(ctx context.Context, setup string, nodes []allocator.Node) error {
	if _, err := ApplyFile(ctx, e.Config, setup, ""); err != nil {
		return err
	}
	kq := kueueclient.NewForConfigOrDie(e.Config)
	var fake []FakeNode
	for _, n := range nodes {
		rf, err := kq.KueueV1beta2().ResourceFlavors().Get(ctx, n.Flavor, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("flavor %s: %w", n.Flavor, err)
		}
		labels := map[string]string{"cloud.google.com/gce-topology-block": n.Block, "cloud.google.com/gce-topology-subblock": n.Rack}
		for k, v := range rf.Spec.NodeLabels {
			labels[k] = v
		}
		fake = append(fake, FakeNode{Name: n.Name, GPUs: n.GPUs, Labels: labels, Taints: TaintsFor(rf)})
	}
	kube := kubernetes.NewForConfigOrDie(e.Config)
	if err := CreateFakeNodes(ctx, kube, fake); err != nil {
		return err
	}
	if err := WaitNodesReady(ctx, kube, len(fake)); err != nil {
		return err
	}
	return WaitClusterQueuesActive(ctx, kq)
}

// WaitClusterQueuesActive waits until there is a ClusterQueue and Kueue
// has set every ClusterQueue's Active condition to True. Kueue does so a
// moment after a setup is applied, once it has seen the queue's flavors,
// topology and admission checks (an AdmissionCheck turns active only when
// its controller, here Kueue's provisioning-request one, has marked it), and
// until then it answers every workload "ClusterQueue … is inactive". A test
// that submits work before can see that answer instead of its own.
func WaitClusterQueuesActive(ctx context.Context, kq kueueclient.Interface) error {
	var inactive []string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cqs, err := kq.KueueV1beta2().ClusterQueues().List(ctx, metav1.ListOptions{})
		if err != nil || len(cqs.Items) == 0 {
			return false, nil
		}
		inactive = inactive[:0]
		for _, cq := range cqs.Items {
			if !apimeta.IsStatusConditionTrue(cq.Status.Conditions, kueuev1beta2.ClusterQueueActive) {
				inactive = append(inactive, cq.Name)
			}
		}
		return len(inactive) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the ClusterQueues to be active (still inactive: %s): %w", strings.Join(inactive, ", "), err)
	}
	return nil
}

// RunFor returns pod annotations that make kwok keep a Job's pod running
// for d before it completes; without them kwok completes it 1 to 6 s after
// it runs. kwok reads both as Go durations ("1h"; a bare number of
// milliseconds is ignored), and waits the smaller of the delay and the
// jitter, so both are set.
func RunFor(d time.Duration) map[string]string {
	return map[string]string{
		"pod-complete.stage.kwok.x-k8s.io/delay":        d.String(),
		"pod-complete.stage.kwok.x-k8s.io/jitter-delay": d.String(),
	}
}

// WaitNodesReady waits until there are at least n nodes and every node is
// Ready, as kwok makes its fake nodes a moment after they are created, and
// free of the node lifecycle controller's taints (node.kubernetes.io/…,
// removed a few seconds after the node is ready). Kueue's topology-aware
// scheduling counts only nodes that are ready and untainted, so a test that
// submits work before can see it placed on another flavor.
func WaitNodesReady(ctx context.Context, kube kubernetes.Interface, n int) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil || len(nodes.Items) < n {
			return false, nil
		}
		for _, node := range nodes.Items {
			ready := false
			for _, c := range node.Status.Conditions {
				ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
			}
			if !ready || slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
				return strings.HasPrefix(t.Key, "node.kubernetes.io/")
			}) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for %d ready nodes: %w", n, err)
	}
	return nil
}

// TaintsFor are the taints a node of rf carries: one NoSchedule taint for
// each toleration of the ResourceFlavor with an Equal operator (the
// elastic flavors kueue-setup writes).
func TaintsFor(rf *kueuev1beta2.ResourceFlavor) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range rf.Spec.Tolerations {
		if t.Operator == corev1.TolerationOpEqual && t.Effect == corev1.TaintEffectNoSchedule {
			out = append(out, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffectNoSchedule})
		}
	}
	return out
}
