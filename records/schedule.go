package records

import "time"

// Wait is one stretch a request spent waiting for GPUs, from its request
// (or its requeue after a preemption) to its admission.
type Wait struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// JobRun is the last completed run of one scheduled job: what keeps a
// digest from being posted twice for the same period, across restarts.
type JobRun struct {
	Job string `json:"job"`
	// Due is the scheduled time of the run (the period it was for). For a
	// job's first record, written when gpubot first knew the job, it is
	// that moment and Baseline is set: nothing before it is due.
	Due time.Time `json:"due"`
	// At is when the run completed; Late says it ran well after Due
	// (gpubot was down at Due).
	At       time.Time `json:"at"`
	Late     bool      `json:"late,omitempty"`
	Baseline bool      `json:"baseline,omitempty"`
	// Failed says the run gave up after its retries; the period counts
	// as done so that it is not retried for ever.
	Failed bool `json:"failed,omitempty"`
}

// Sample is the cluster's state at one moment, taken periodically so that
// the digest and the weekly report can average what gpubot does not
// otherwise keep over time: fragmentation and what the queue waited for.
type Sample struct {
	At      time.Time      `json:"at"`
	Flavors []FlavorSample `json:"flavors"`
	// Pending counts pending workloads; Waiting counts them by what they
	// wait for (allocator reasons: quota, cohort, capacity,
	// fragmentation, topology, priority).
	Pending int            `json:"pending"`
	Waiting map[string]int `json:"waiting,omitempty"`
	// AwaitingApproval counts requests held for approval (no quota held).
	AwaitingApproval int `json:"awaitingApproval,omitempty"`
}

// FlavorSample is one flavor's capacity and fragmentation in a Sample:
// both views the allocator computes, measure (a) and the largest request
// that fits.
type FlavorSample struct {
	Flavor string `json:"flavor"`
	GPUs   int    `json:"gpus"`
	Free   int    `json:"free"`
	// Fragmented is measure (a) in GPUs: free GPUs a typical request
	// cannot use.
	Fragmented float64 `json:"fragmented"`
	// Largest is the largest request that fits now anywhere, and in one
	// host, rack and block.
	Largest      int `json:"largest"`
	LargestHost  int `json:"largestHost"`
	LargestRack  int `json:"largestRack"`
	LargestBlock int `json:"largestBlock"`
}

// FragPctAll is the sample's measure (a) over all flavors, as a
// percentage of all GPUs (0 for a cluster without GPUs).
func (s Sample) FragPctAll() float64 {
	frag, all := 0.0, 0
	for _, f := range s.Flavors {
		frag += f.Fragmented
		all += f.GPUs
	}
	if all == 0 {
		return 0
	}
	return 100 * frag / float64(all)
}

// WaitingSince is when r's current (or last) wait for GPUs began: its
// creation (so the wait for approval counts), or its requeue after a
// preemption.
func (r Request) WaitingSince() time.Time {
	if (len(r.Waits) > 0 || r.Preemptions > 0) && !r.QueuedAt.IsZero() {
		return r.QueuedAt
	}
	return r.CreatedAt
}
