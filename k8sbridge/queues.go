package k8sbridge

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/allocator"
)

// readQueues turns ClusterQueues with GPU quota into queues, named after
// the team whose LocalQueue points at them, with what Kueue applies: the
// quotas of the resource group that covers GPUs (its GPU, CPU and memory
// quotas), the cohort, the automatic preemption (borrowWithinCohort
// included), flavorFungibility and the fair-sharing weight. What of a
// ClusterQueue the allocator does not model is collected by unmodelled
// (features.go). It returns the queue name of each ClusterQueue.
func (b *Bridge) readQueues(v *view, cqs []*kueue.ClusterQueue, flavors map[string]*flavorInfo) map[string]string {
	teamOf := map[string]string{}
	for _, t := range b.cfg.Teams {
		lq, err := b.lqs.LocalQueues(t.Namespace).Get(t.LocalQueue)
		if err != nil {
			continue
		}
		cq := string(lq.Spec.ClusterQueue)
		if _, dup := teamOf[cq]; !dup {
			teamOf[cq] = t.Name
		}
	}
	names := map[string]string{}
	gpu := corev1.ResourceName(b.cfg.GPUResource)
	for _, cq := range cqs {
		q := allocator.Queue{Name: cq.Name, Cohort: string(cq.Spec.CohortName), Quotas: map[string]allocator.Quota{},
			Preemption: allocator.Preemption{WithinClusterQueue: allocator.PreemptNever, ReclaimWithinCohort: allocator.PreemptNever}}
		if t, ok := teamOf[cq.Name]; ok {
			q.Name = t
		}
		if p := cq.Spec.Preemption; p != nil {
			if p.WithinClusterQueue != "" {
				q.Preemption.WithinClusterQueue = string(p.WithinClusterQueue)
			}
			if p.ReclaimWithinCohort != "" {
				q.Preemption.ReclaimWithinCohort = string(p.ReclaimWithinCohort)
			}
			if bw := p.BorrowWithinCohort; bw != nil && bw.Policy == kueue.BorrowWithinCohortPolicyLowerPriority && q.Cohort != "" {
				q.Preemption.BorrowWithinCohort = allocator.PreemptLowerPriority
				q.Preemption.BorrowWithinCohortMaxPriority = bw.MaxPriorityThreshold
			}
		}
		if ff := cq.Spec.FlavorFungibility; ff != nil {
			q.FlavorFungibility = allocator.FlavorFungibility{WhenCanBorrow: string(ff.WhenCanBorrow), WhenCanPreempt: string(ff.WhenCanPreempt)}
			if ff.Preference != nil {
				q.FlavorFungibility.Preference = string(*ff.Preference)
			}
		}
		q.Weight = fairWeight(cq.Spec.FairSharing)
		other := map[corev1.ResourceName]bool{}
		for _, rg := range cq.Spec.ResourceGroups {
			if !slices.Contains(rg.CoveredResources, gpu) {
				for _, r := range rg.CoveredResources {
					other[r] = true
				}
				continue
			}
			for _, fq := range rg.Flavors {
				if _, ok := flavors[string(fq.Name)]; !ok {
					continue
				}
				quota, ok := readQuota(fq.Resources, gpu, q.Cohort != "")
				if !ok {
					continue
				}
				q.Flavors = append(q.Flavors, string(fq.Name))
				q.Quotas[string(fq.Name)] = quota
			}
		}
		if len(q.Flavors) == 0 {
			continue
		}
		if _, team := teamOf[cq.Name]; !team && slices.ContainsFunc(b.cfg.Teams, func(t Team) bool { return t.Name == cq.Name }) {
			q.Name = "cq:" + cq.Name // a team's name, but not that team's ClusterQueue
		}
		names[cq.Name] = q.Name
		v.cluster.Queues = append(v.cluster.Queues, q)
		if other[corev1.ResourceCPU] || other[corev1.ResourceMemory] {
			v.separate[q.Name] = true
		}
	}
	return names
}

// readQuota reads one flavor's quotas of GPUs, CPU and memory; ok is
// false without a GPU quota. Limits count only with a parent to borrow
// from or lend to (Kueue rejects them otherwise).
func readQuota(rs []kueue.ResourceQuota, gpu corev1.ResourceName, parent bool) (allocator.Quota, bool) {
	var q allocator.Quota
	ok := false
	for _, r := range rs {
		switch r.Name {
		case gpu:
			ok = true
			q.Nominal = int(r.NominalQuota.Value())
			if r.BorrowingLimit != nil && parent {
				l := int(r.BorrowingLimit.Value())
				q.BorrowingLimit = &l
			}
			if r.LendingLimit != nil && parent {
				l := int(r.LendingLimit.Value())
				q.LendingLimit = &l
			}
		case corev1.ResourceCPU:
			q.CPU = resourceQuota(r, (*resource.Quantity).MilliValue, parent)
		case corev1.ResourceMemory:
			q.Memory = resourceQuota(r, (*resource.Quantity).Value, parent)
		}
	}
	return q, ok
}

func resourceQuota(r kueue.ResourceQuota, value func(*resource.Quantity) int64, parent bool) *allocator.ResourceQuota {
	rq := &allocator.ResourceQuota{Nominal: value(&r.NominalQuota)}
	if r.BorrowingLimit != nil && parent {
		v := value(r.BorrowingLimit)
		rq.BorrowingLimit = &v
	}
	if r.LendingLimit != nil && parent {
		v := value(r.LendingLimit)
		rq.LendingLimit = &v
	}
	return rq
}

// fairWeight is a ClusterQueue's or Cohort's fair-sharing weight in the
// allocator's terms (Kueue's 0 is ZeroWeight; unset is 1).
func fairWeight(fs *kueue.FairSharing) float64 {
	if fs == nil || fs.Weight == nil {
		return 1
	}
	if w := fs.Weight.AsApproximateFloat64(); w > 0 {
		return w
	}
	return allocator.ZeroWeight
}

// readCohorts turns the Cohort objects into the allocator's cohort tree:
// parents, fair-sharing weights, and the quotas they give on the
// flavors the model has (of the resource group covering GPUs).
func (b *Bridge) readCohorts(v *view, flavors map[string]*flavorInfo) {
	cs, err := b.cohorts.List(labels.Everything())
	if err != nil {
		return
	}
	slices.SortFunc(cs, func(a, c *kueue.Cohort) int {
		if a.Name < c.Name {
			return -1
		}
		if a.Name > c.Name {
			return 1
		}
		return 0
	})
	gpu := corev1.ResourceName(b.cfg.GPUResource)
	for _, c := range cs {
		co := allocator.Cohort{Name: c.Name, Parent: string(c.Spec.ParentName), Weight: fairWeight(c.Spec.FairSharing),
			Quotas: map[string]allocator.Quota{}}
		for _, rg := range c.Spec.ResourceGroups {
			if !slices.Contains(rg.CoveredResources, gpu) {
				continue
			}
			for _, fq := range rg.Flavors {
				if _, ok := flavors[string(fq.Name)]; !ok {
					continue
				}
				if quota, ok := readQuota(fq.Resources, gpu, co.Parent != ""); ok {
					co.Quotas[string(fq.Name)] = quota
				}
			}
		}
		v.cluster.Cohorts = append(v.cluster.Cohorts, co)
	}
}
