package k8sbridge

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Identity names a cluster for as long as it exists: the UID of its
// kube-system namespace, which every cluster has and which is created
// once, when the cluster is. Server is the API server's URL as gpubot
// reached it, for messages only: the same cluster has another URL from
// inside and from outside.
type Identity struct {
	UID    string
	Server string
}

// Identity reads the cluster's identity (get on namespaces/kube-system;
// deploy/base's ClusterRole grants exactly that).
func (b *Bridge) Identity(ctx context.Context) (Identity, error) {
	ns, err := b.kube.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	if err != nil {
		return Identity{}, fmt.Errorf("reading the cluster's identity (namespace kube-system): %w", err)
	}
	return Identity{UID: string(ns.UID), Server: b.server}, nil
}
