package k8sbridge

import (
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
	kueuelisters "sigs.k8s.io/kueue/client-go/listers/kueue/v1beta2"
)

// gpubot watches namespaced objects (Jobs, Pods, Workloads, LocalQueues)
// only in the teams' namespaces, so that its RBAC is a Role in each of them
// rather than a ClusterRole over every namespace (see RBAC). client-go's
// informers watch one namespace or all; these listers join one informer
// per team namespace, and answer an empty list for any other namespace.

// teamNamespaces returns the namespaces of cfg's teams, sorted, once each.
func (c *Config) teamNamespaces() []string {
	var out []string
	for _, t := range c.Teams {
		out = append(out, t.Namespace)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func emptyIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

type jobListers map[string]batchlisters.JobLister

func (m jobListers) List(sel labels.Selector) ([]*batchv1.Job, error) {
	var out []*batchv1.Job
	for _, ns := range sortedKeys(m) {
		l, err := m[ns].Jobs(ns).List(sel)
		if err != nil {
			return nil, err
		}
		out = append(out, l...)
	}
	return out, nil
}

func (m jobListers) Jobs(ns string) batchlisters.JobNamespaceLister {
	if l, ok := m[ns]; ok {
		return l.Jobs(ns)
	}
	return batchlisters.NewJobLister(emptyIndexer()).Jobs(ns)
}

type podListers map[string]corelisters.PodLister

func (m podListers) List(sel labels.Selector) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for _, ns := range sortedKeys(m) {
		l, err := m[ns].Pods(ns).List(sel)
		if err != nil {
			return nil, err
		}
		out = append(out, l...)
	}
	return out, nil
}

func (m podListers) Pods(ns string) corelisters.PodNamespaceLister {
	if l, ok := m[ns]; ok {
		return l.Pods(ns)
	}
	return corelisters.NewPodLister(emptyIndexer()).Pods(ns)
}

type workloadListers map[string]kueuelisters.WorkloadLister

func (m workloadListers) List(sel labels.Selector) ([]*kueue.Workload, error) {
	var out []*kueue.Workload
	for _, ns := range sortedKeys(m) {
		l, err := m[ns].Workloads(ns).List(sel)
		if err != nil {
			return nil, err
		}
		out = append(out, l...)
	}
	return out, nil
}

func (m workloadListers) Workloads(ns string) kueuelisters.WorkloadNamespaceLister {
	if l, ok := m[ns]; ok {
		return l.Workloads(ns)
	}
	return kueuelisters.NewWorkloadLister(emptyIndexer()).Workloads(ns)
}

type localQueueListers map[string]kueuelisters.LocalQueueLister

func (m localQueueListers) List(sel labels.Selector) ([]*kueue.LocalQueue, error) {
	var out []*kueue.LocalQueue
	for _, ns := range sortedKeys(m) {
		l, err := m[ns].LocalQueues(ns).List(sel)
		if err != nil {
			return nil, err
		}
		out = append(out, l...)
	}
	return out, nil
}

func (m localQueueListers) LocalQueues(ns string) kueuelisters.LocalQueueNamespaceLister {
	if l, ok := m[ns]; ok {
		return l.LocalQueues(ns)
	}
	return kueuelisters.NewLocalQueueLister(emptyIndexer()).LocalQueues(ns)
}

// ownerIndexes finds Workloads by owner Job ("namespace/name") in the
// namespace's informer.
type ownerIndexes map[string]cache.Indexer

func (m ownerIndexes) ByIndex(index, key string) ([]any, error) {
	for ns, ix := range m {
		if len(key) > len(ns) && key[:len(ns)] == ns && key[len(ns)] == '/' {
			return ix.ByIndex(index, key)
		}
	}
	return nil, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
