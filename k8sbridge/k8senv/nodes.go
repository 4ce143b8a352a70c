package k8senv

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"

	"github.com/gpubot/gpubot/allocator"
)

// FakeNode is a GPU node that kwok keeps ready and whose pods it runs.
type FakeNode struct {
	Name   string
	GPUs   int
	Labels map[string]string
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
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}}}
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
// cluster matches a gpubot configuration's simulated cluster.
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
		fake = append(fake, FakeNode{Name: n.Name, GPUs: n.GPUs, Labels: labels})
	}
	return CreateFakeNodes(ctx, kubernetes.NewForConfigOrDie(e.Config), fake)
}
