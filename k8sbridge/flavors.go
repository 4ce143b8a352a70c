package k8sbridge

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/allocator"
)

// flavorInfo is one ResourceFlavor in allocator terms.
type flavorInfo struct {
	name                         string
	nodeLabels                   map[string]string
	topology                     string // the Kueue Topology's name; "" for none
	blockLabel, rackLabel, hostL string
	gpn                          int
	nodes, gpus                  int // ready GPU nodes it selects, and their GPUs
}

// gpuFlavors names the flavors some ClusterQueue gives GPU quota on.
func gpuFlavors(cqs []*kueue.ClusterQueue, gpu corev1.ResourceName) map[string]bool {
	out := map[string]bool{}
	for _, cq := range cqs {
		for _, rg := range cq.Spec.ResourceGroups {
			if slices.Contains(rg.CoveredResources, gpu) {
				for _, fq := range rg.Flavors {
					out[string(fq.Name)] = true
				}
			}
		}
	}
	return out
}

// readFlavors turns ResourceFlavors into flavors and the ready GPU nodes
// they select into nodes. Capacity comes only from the cluster: a flavor
// that selects no node has none (quota without nodes is a real state, an
// autoscaled pool at zero). GPU nodes no flavor selects are described in
// v.unmatched.
func (b *Bridge) readFlavors(v *view, forGPUs map[string]bool) (map[string]*flavorInfo, error) {
	rfs, err := b.flavors.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("k8sbridge: listing ResourceFlavors: %w", err)
	}
	slices.SortFunc(rfs, func(a, c *kueue.ResourceFlavor) int { return strings.Compare(a.Name, c.Name) })
	nodes, err := b.nodes.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("k8sbridge: listing nodes: %w", err)
	}
	slices.SortFunc(nodes, func(a, c *corev1.Node) int { return strings.Compare(a.Name, c.Name) })
	configured := map[string]int{}
	elastic := b.elasticFlavors()
	for _, f := range b.cfg.Flavors {
		configured[f.Name] = f.GPUsPerNode
	}
	out := map[string]*flavorInfo{}
	for _, rf := range rfs {
		fi := &flavorInfo{name: rf.Name, nodeLabels: rf.Spec.NodeLabels,
			blockLabel: b.cfg.BlockLabel, rackLabel: b.cfg.RackLabel, hostL: b.cfg.HostLabel}
		if rf.Spec.TopologyName != nil {
			fi.topology = string(*rf.Spec.TopologyName)
			if t, err := b.topologies.Get(fi.topology); err == nil {
				lv := t.Spec.Levels
				n := len(lv)
				fi.hostL, fi.rackLabel, fi.blockLabel = "", "", ""
				if n >= 1 {
					fi.hostL = lv[n-1].NodeLabel
				}
				if n >= 2 {
					fi.rackLabel = lv[n-2].NodeLabel
				}
				if n >= 3 {
					fi.blockLabel = lv[n-3].NodeLabel
				}
			}
		}
		out[rf.Name] = fi
	}
	var unmatched []*corev1.Node
	for _, n := range nodes {
		gpus := quantityInt(n.Status.Allocatable, b.cfg.GPUResource)
		if gpus <= 0 || !nodeReady(n) {
			continue
		}
		fi := matchFlavor(rfs, out, n, forGPUs)
		if fi == nil {
			unmatched = append(unmatched, n)
			continue
		}
		fi.gpn = max(fi.gpn, gpus)
		fi.nodes++
		fi.gpus += gpus
		node := allocator.Node{
			Name: n.Name, Flavor: fi.name, GPUs: gpus,
			Block: labelOr(n.Labels, fi.blockLabel), Rack: labelOr(n.Labels, fi.rackLabel),
		}
		if q, ok := n.Status.Allocatable[corev1.ResourceCPU]; ok {
			node.CPU = q.MilliValue()
		}
		if q, ok := n.Status.Allocatable[corev1.ResourceMemory]; ok {
			node.Memory = q.Value()
		}
		v.cluster.Nodes = append(v.cluster.Nodes, node)
	}
	v.unmatched = describeUnmatched(unmatched, rfs, forGPUs, b.acceleratorLabels())
	for _, rf := range rfs {
		fi := out[rf.Name]
		if fi.gpn == 0 {
			fi.gpn = configured[rf.Name]
		}
		if fi.gpn == 0 {
			fi.gpn = 8
		}
		v.cluster.Flavors = append(v.cluster.Flavors, allocator.Flavor{Name: rf.Name, GPUsPerNode: fi.gpn, Elastic: elastic[rf.Name]})
	}
	return out, nil
}

// matchFlavor finds the ResourceFlavor a node belongs to, as Kueue's
// topology-aware scheduling sees it: a flavor selects the nodes that have
// all its node labels. The flavor with the most labels wins, then the
// first by name; a flavor without node labels (it selects every node) is
// taken only if no other matches and it gives GPU quota.
func matchFlavor(rfs []*kueue.ResourceFlavor, fs map[string]*flavorInfo, n *corev1.Node, forGPUs map[string]bool) *flavorInfo {
	var best *kueue.ResourceFlavor
	for _, rf := range rfs {
		if len(rf.Spec.NodeLabels) == 0 || !selects(rf, n) {
			continue
		}
		if best == nil || len(rf.Spec.NodeLabels) > len(best.Spec.NodeLabels) {
			best = rf
		}
	}
	if best == nil {
		for _, rf := range rfs {
			if len(rf.Spec.NodeLabels) == 0 && forGPUs[rf.Name] {
				best = rf
				break
			}
		}
	}
	if best == nil {
		return nil
	}
	return fs[best.Name]
}

func selects(rf *kueue.ResourceFlavor, n *corev1.Node) bool {
	for k, val := range rf.Spec.NodeLabels {
		if n.Labels[k] != val {
			return false
		}
	}
	return true
}

// describeUnmatched says, per group of GPU nodes with the same accelerator
// labels, that no ResourceFlavor selects them and what the flavors select:
// "4 GPU nodes match no ResourceFlavor: labels
// nvidia.com/gpu.product=NVIDIA-H200 (h200-1, h200-2, …); the flavors
// select cloud.google.com/gke-accelerator=nvidia-h100-80gb (h100)".
func describeUnmatched(nodes []*corev1.Node, rfs []*kueue.ResourceFlavor, forGPUs map[string]bool, keys []string) []string {
	if len(nodes) == 0 {
		return nil
	}
	groups := map[string][]string{}
	var order []string
	for _, n := range nodes {
		var ls []string
		for _, k := range keys {
			if val, ok := n.Labels[k]; ok {
				ls = append(ls, k+"="+val)
			}
		}
		key := strings.Join(ls, ", ")
		if key == "" {
			key = "none of " + strings.Join(keys, ", ")
		}
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], n.Name)
	}
	var sel []string
	for _, rf := range rfs {
		if !forGPUs[rf.Name] {
			continue
		}
		sel = append(sel, selectsText(rf.Spec.NodeLabels)+" ("+rf.Name+")")
	}
	flavors := "no ResourceFlavor gives GPU quota"
	if len(sel) > 0 {
		flavors = "the flavors select " + strings.Join(sel, ", ")
	}
	var out []string
	for _, key := range order {
		names := groups[key]
		sample := names
		if len(sample) > 3 {
			sample = append(slices.Clone(names[:2]), "…")
		}
		what := fmt.Sprintf("%d GPU nodes match", len(names))
		if len(names) == 1 {
			what = "1 GPU node matches"
		}
		out = append(out, fmt.Sprintf("%s no ResourceFlavor: labels %s (%s); %s", what, key, strings.Join(sample, ", "), flavors))
	}
	return out
}

// selectsText writes node labels as k=v, sorted; "every node" for none.
func selectsText(l map[string]string) string {
	if len(l) == 0 {
		return "every node"
	}
	keys := slices.Sorted(maps.Keys(l))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + l[k]
	}
	return strings.Join(parts, ",")
}

func labelOr(l map[string]string, key string) string {
	if key == "" {
		return ""
	}
	return l[key]
}
