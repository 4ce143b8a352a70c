package k8sbridge

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpubot/gpubot/allocator"
)

// readQueues turns ClusterQueues with GPU quota into queues, named after
// the team whose LocalQueue points at them, with the quotas, cohort and
// automatic preemption Kueue applies. What of a ClusterQueue the
// allocator does not model is collected by unmodelled (features.go). It
// returns the queue name of each ClusterQueue.
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
		}
		if fs := cq.Spec.FairSharing; fs != nil && fs.Weight != nil {
			q.Weight = fs.Weight.AsApproximateFloat64()
		}
		for _, rg := range cq.Spec.ResourceGroups {
			if !slices.Contains(rg.CoveredResources, gpu) {
				continue
			}
			for _, fq := range rg.Flavors {
				if _, ok := flavors[string(fq.Name)]; !ok {
					continue
				}
				for _, r := range fq.Resources {
					if r.Name != gpu {
						continue
					}
					quota := allocator.Quota{Nominal: int(r.NominalQuota.Value())}
					if r.BorrowingLimit != nil && q.Cohort != "" {
						l := int(r.BorrowingLimit.Value())
						quota.BorrowingLimit = &l
					}
					if r.LendingLimit != nil && q.Cohort != "" {
						l := int(r.LendingLimit.Value())
						quota.LendingLimit = &l
					}
					q.Flavors = append(q.Flavors, string(fq.Name))
					q.Quotas[string(fq.Name)] = quota
				}
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
	}
	return names
}
