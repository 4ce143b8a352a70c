package commands

import (
	"fmt"
	"math"
	"strconv"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// What the replies say when CPU or memory, not GPUs, stops a request,
// and the teams' dominant resource shares under Kueue's Fair Sharing.

// blocker is the resource that stops r in snap: CPU or memory when one of
// them does, else GPUs.
func (s *Service) blocker(snap *allocator.Snapshot, r records.Request) allocator.Resource {
	if _, ok := snap.Workload(r.ID); ok {
		_, res := snap.DiagnoseResource(r.ID)
		return res
	}
	w := s.workload(r)
	_, _, res := snap.FitResource(w)
	return res
}

// withResource is a reason's name with the resource when it is not GPUs:
// "quota (CPU)".
func withResource(reason allocator.Reason, res allocator.Resource) string {
	switch reason {
	case allocator.ReasonQuota, allocator.ReasonCohort, allocator.ReasonCapacity, allocator.ReasonFragmentation:
		if res != allocator.ResourceGPU {
			return fmt.Sprintf("%s (%s)", reason, res)
		}
	}
	return string(reason)
}

// amount writes a CPU (millicores) or memory (bytes) amount for people.
func amount(res allocator.Resource, v int64) string {
	switch res {
	case allocator.ResourceCPU:
		return strconv.FormatFloat(float64(v)/1000, 'f', -1, 64) + " cores"
	case allocator.ResourceMemory:
		return strconv.FormatFloat(math.Round(float64(v)/(1<<30)*10)/10, 'f', -1, 64) + " GiB of memory"
	}
	return fmt.Sprintf("%d GPUs", v)
}

// need is what r asks for of res.
func (s *Service) need(r records.Request, res allocator.Resource) int64 {
	w := s.workload(r)
	switch res {
	case allocator.ResourceCPU:
		return w.CPU
	case allocator.ResourceMemory:
		return w.Memory
	}
	return int64(w.GPUs)
}

// explainResource is explain for a request that CPU or memory stops.
func (s *Service) explainResource(snap *allocator.Snapshot, r records.Request, reason allocator.Reason, res allocator.Resource, flavor string) string {
	need := amount(res, s.need(r, res))
	used, nominal, covered := snap.ResourceUse(r.Team, flavor, res)
	switch reason {
	case allocator.ReasonQuota:
		if !covered {
			return fmt.Sprintf("%s has no %s quota on %s, and Kueue admits nothing that asks for %s there", r.Team, res, flavor, res)
		}
		return fmt.Sprintf("%s uses %s of its %s %s quota on %s and this needs %s more", r.Team, amount(res, used), amount(res, nominal), res, flavor, need)
	case allocator.ReasonCohort:
		q, _ := s.queue(r.Team)
		return fmt.Sprintf("%s uses %s of its %s %s quota on %s and the %s pool has no %s left to lend for the %s this needs", r.Team,
			amount(res, used), amount(res, nominal), res, flavor, q.Cohort, res, need)
	case allocator.ReasonCapacity:
		if free, ok := snap.FreeResource(flavor, res); ok {
			return fmt.Sprintf("the %s nodes have %s free and this needs %s", flavor, amount(res, free), need)
		}
	case allocator.ReasonFragmentation:
		return fmt.Sprintf("the %s nodes have GPUs free, but none has the %s a pod of this needs besides its GPUs", flavor, res)
	}
	return ""
}

// dominantShare writes a queue's dominant resource share: "250‰ of
// GPUs", "0" when it borrows nothing, "∞" for weight 0.
func dominantShare(d *allocator.DominantShare) string {
	switch {
	case d == nil || !d.Borrowing || d.WeightedShare == 0:
		return "0"
	case math.IsInf(d.WeightedShare, 1):
		return "∞ (weight 0)"
	}
	return fmt.Sprintf("%.0f‰ of %s", d.WeightedShare, d.Resource)
}
