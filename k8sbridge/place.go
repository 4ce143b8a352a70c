package k8sbridge

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/allocator"
)

// place gives every admitted workload the nodes the allocator needs: the
// nodes Kueue's topology assignment or the pods name when they match the
// allocator's pod shape and have room, otherwise the flavor's node with
// the fewest free GPUs that still fit each pod, otherwise an overflow
// node (the cluster is over-admitted, or nodes are not known).
func (b *Bridge) place(v *view) {
	free := map[string]int{}
	flavorOf := map[string]string{}
	gpn := map[string]int{}
	for _, f := range v.cluster.Flavors {
		gpn[f.Name] = f.GPUsPerNode
	}
	for _, n := range v.cluster.Nodes {
		free[n.Name] = n.GPUs
		flavorOf[n.Name] = n.Flavor
	}
	var admitted []int
	for i, w := range v.workloads {
		if w.Admission != nil {
			admitted = append(admitted, i)
		}
	}
	// Known placements first, then the rest, each in admission order.
	slices.SortStableFunc(admitted, func(a, c int) int {
		wa, wc := v.workloads[a], v.workloads[c]
		return cmp.Or(-cmp.Compare(len(wa.Admission.Nodes), len(wc.Admission.Nodes)), wa.Admission.At.Compare(wc.Admission.At))
	})
	overflow := 0
	for _, i := range admitted {
		w := &v.workloads[i]
		a := *w.Admission
		w.Admission = &a
		g := gpn[a.Flavor]
		if g == 0 {
			w.Admission = nil
			continue
		}
		w.GPUs = shapeable(w.GPUs, g)
		pods, per, _ := allocator.PodShape(w.GPUs, g)
		if len(a.Nodes) == pods && fits(a.Nodes, per, a.Flavor, free, flavorOf) {
			for _, n := range a.Nodes {
				free[n] -= per
			}
			continue
		}
		a.Nodes = make([]string, 0, pods)
		for range pods {
			best := ""
			for _, n := range v.cluster.Nodes {
				if n.Flavor != a.Flavor || free[n.Name] < per {
					continue
				}
				if best == "" || free[n.Name] < free[best] {
					best = n.Name
				}
			}
			if best == "" {
				overflow++
				best = fmt.Sprintf("%s-overflow-%d", a.Flavor, overflow)
				v.cluster.Nodes = append(v.cluster.Nodes, allocator.Node{Name: best, Flavor: a.Flavor, GPUs: per})
				free[best], flavorOf[best] = per, a.Flavor
			}
			free[best] -= per
			a.Nodes = append(a.Nodes, best)
		}
	}
}

func fits(nodes []string, per int, flavor string, free map[string]int, flavorOf map[string]string) bool {
	need := map[string]int{}
	for _, n := range nodes {
		need[n] += per
	}
	for n, g := range need {
		if flavorOf[n] != flavor || free[n] < g {
			return false
		}
	}
	return true
}

// shapeable rounds gpus up to the nearest size the allocator can split
// into equal pods on nodes of gpn GPUs.
func shapeable(gpus, gpn int) int {
	for g := gpus; g < gpus+gpn*2; g++ {
		if _, _, err := allocator.PodShape(g, gpn); err == nil {
			return g
		}
	}
	return gpus
}

// podGPUs is what one pod requests of the GPU resource (requests, or
// limits when no request is given), over its containers.
func podGPUs(spec *corev1.PodSpec, gpu corev1.ResourceName) int {
	total := 0
	for _, c := range spec.Containers {
		q, ok := c.Resources.Requests[gpu]
		if !ok {
			q, ok = c.Resources.Limits[gpu]
		}
		if ok {
			total += int(q.Value())
		}
	}
	return total
}

// podCPUMemory is what one pod of spec asks for of CPU (millicores) and
// memory (bytes), as Kubernetes and Kueue count a pod's requests: the
// larger of its containers' sum and its largest init container, plus its
// overhead; a container's limit stands for a request it does not give.
func podCPUMemory(spec *corev1.PodSpec) (cpu, mem int64) {
	get := func(c corev1.Container, r corev1.ResourceName) int64 {
		q, ok := c.Resources.Requests[r]
		if !ok {
			q, ok = c.Resources.Limits[r]
		}
		if !ok {
			return 0
		}
		if r == corev1.ResourceCPU {
			return q.MilliValue()
		}
		return q.Value()
	}
	for _, c := range spec.Containers {
		cpu += get(c, corev1.ResourceCPU)
		mem += get(c, corev1.ResourceMemory)
	}
	for _, c := range spec.InitContainers {
		cpu = max(cpu, get(c, corev1.ResourceCPU))
		mem = max(mem, get(c, corev1.ResourceMemory))
	}
	if q, ok := spec.Overhead[corev1.ResourceCPU]; ok {
		cpu += q.MilliValue()
	}
	if q, ok := spec.Overhead[corev1.ResourceMemory]; ok {
		mem += q.Value()
	}
	return cpu, mem
}

func quantityInt(l corev1.ResourceList, name string) int {
	q, ok := l[corev1.ResourceName(name)]
	if !ok {
		return 0
	}
	return int(q.Value())
}

// levelOf maps a topology node label to gpubot's level.
func levelOf(label string, flavors map[string]*flavorInfo, cfg Config) allocator.Level {
	for _, fi := range flavors {
		switch label {
		case fi.hostL:
			return allocator.LevelHost
		case fi.rackLabel:
			return allocator.LevelRack
		case fi.blockLabel:
			return allocator.LevelBlock
		}
	}
	switch label {
	case cfg.HostLabel:
		return allocator.LevelHost
	case cfg.RackLabel:
		return allocator.LevelRack
	case cfg.BlockLabel:
		return allocator.LevelBlock
	}
	return allocator.LevelNone
}

// tasNodes lists one node name per pod from a topology assignment whose
// last level is the host level; otherwise nil.
func tasNodes(ta *kueue.TopologyAssignment, fi *flavorInfo) []string {
	if len(ta.Levels) == 0 {
		return nil
	}
	last := len(ta.Levels) - 1
	if fi != nil && fi.hostL != "" && ta.Levels[last] != fi.hostL {
		return nil
	}
	var out []string
	for _, sl := range ta.Slices {
		if last >= len(sl.ValuesPerLevel) {
			return nil
		}
		lv := sl.ValuesPerLevel[last]
		for d := range int(sl.DomainCount) {
			name := ""
			switch {
			case lv.Universal != nil:
				name = *lv.Universal
			case lv.Individual != nil && d < len(lv.Individual.Roots):
				name = ptrOr(lv.Individual.Prefix, "") + lv.Individual.Roots[d] + ptrOr(lv.Individual.Suffix, "")
			default:
				return nil
			}
			count := 0
			switch {
			case sl.PodCounts.Universal != nil:
				count = int(*sl.PodCounts.Universal)
			case d < len(sl.PodCounts.Individual):
				count = int(sl.PodCounts.Individual[d])
			}
			for range count {
				out = append(out, name)
			}
		}
	}
	return out
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

var uidInMessage = regexp.MustCompile(`\(UID: ([0-9a-fA-F-]+)`)

// preemptorUID finds the preemptor's Workload UID in the message of Kueue's
// Preempted condition ("Preempted to accommodate a workload (UID: …, …)").
func preemptorUID(msg string) string {
	if m := uidInMessage.FindStringSubmatch(msg); m != nil {
		return strings.ToLower(m[1])
	}
	return ""
}
