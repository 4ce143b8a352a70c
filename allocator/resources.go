package allocator

import "fmt"

// Resource is one of the resources the allocator counts: a small fixed
// vector, the ones a GPU cluster's ClusterQueues give quota on.
type Resource int

const (
	// ResourceGPU is nvidia.com/gpu, in whole GPUs.
	ResourceGPU Resource = iota
	// ResourceCPU is cpu, in millicores.
	ResourceCPU
	// ResourceMemory is memory, in bytes.
	ResourceMemory
	numResources
)

var resourceNames = [...]string{"GPUs", "CPU", "memory"}

// String returns "GPUs", "CPU" or "memory".
func (r Resource) String() string {
	if r < 0 || r >= numResources {
		return fmt.Sprintf("Resource(%d)", int(r))
	}
	return resourceNames[r]
}

// resVec is an amount of each resource.
type resVec [numResources]int64

// reqOf is what workload w asks for.
func reqOf(w *Workload) resVec {
	return resVec{int64(w.GPUs), w.CPU, w.Memory}
}

// perPod splits a workload's request over pods pods (rounding up, as a
// pod cannot ask for a fraction of a millicore or a byte).
func (v resVec) perPod(pods int32) resVec {
	if pods <= 0 {
		return resVec{}
	}
	var out resVec
	for r := range v {
		out[r] = (v[r] + int64(pods) - 1) / int64(pods)
	}
	return out
}

// fr indexes a (flavor, resource) pair.
func fr(f int, r Resource) int { return f*int(numResources) + int(r) }

// frFlavor and frResource invert fr.
func frFlavor(i int) int        { return i / int(numResources) }
func frResource(i int) Resource { return Resource(i % int(numResources)) }

// quotaOf returns the GPU, CPU and memory quotas of q as ResourceQuotas
// (nil for a resource q does not cover).
func (q Quota) resource(r Resource) *ResourceQuota {
	switch r {
	case ResourceGPU:
		rq := &ResourceQuota{Nominal: int64(q.Nominal)}
		if q.BorrowingLimit != nil {
			b := int64(*q.BorrowingLimit)
			rq.BorrowingLimit = &b
		}
		if q.LendingLimit != nil {
			l := int64(*q.LendingLimit)
			rq.LendingLimit = &l
		}
		return rq
	case ResourceCPU:
		return q.CPU
	case ResourceMemory:
		return q.Memory
	}
	return nil
}
