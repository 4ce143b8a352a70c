package allocator_test

import (
	"fmt"
	"slices"
	"time"

	"github.com/gpubot/gpubot/allocator"
)

func exampleCluster() *allocator.Cluster {
	intp := func(n int) *int { return &n }
	return &allocator.Cluster{
		Flavors: []allocator.Flavor{{Name: "h100", GPUsPerNode: 8}},
		Nodes: []allocator.Node{
			{Name: "gpu-1", Flavor: "h100", GPUs: 8, Block: "b1", Rack: "r1"},
			{Name: "gpu-2", Flavor: "h100", GPUs: 8, Block: "b1", Rack: "r1"},
		},
		Queues: []allocator.Queue{
			{
				Name: "nlp", Cohort: "research", Flavors: []string{"h100"},
				Quotas:     map[string]allocator.Quota{"h100": {Nominal: 8, BorrowingLimit: intp(4)}},
				Preemption: allocator.Preemption{WithinClusterQueue: allocator.PreemptLowerPriority, ReclaimWithinCohort: allocator.PreemptAny},
			},
			{
				Name: "vision", Cohort: "research", Flavors: []string{"h100"},
				Quotas: map[string]allocator.Quota{"h100": {Nominal: 8}},
			},
		},
		Policy: allocator.Policy{Mode: allocator.BestEffortFIFO},
	}
}

func ExampleSnapshot_Schedule() {
	now := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	s, err := allocator.NewSnapshot(exampleCluster(), now, []allocator.Workload{
		// vision borrows nlp's idle quota…
		{ID: "vis-1", Queue: "vision", GPUs: 8, Created: now.Add(-2 * time.Hour),
			Admission: &allocator.Admission{Flavor: "h100", At: now.Add(-time.Hour), Nodes: []string{"gpu-1"}}},
		{ID: "vis-2", Queue: "vision", GPUs: 8, Created: now.Add(-2 * time.Hour),
			Admission: &allocator.Admission{Flavor: "h100", At: now.Add(-30 * time.Minute), Nodes: []string{"gpu-2"}}},
		// …until nlp needs it back: the most recently admitted goes.
		{ID: "nlp-1", Queue: "nlp", GPUs: 4, Created: now.Add(-time.Minute)},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("nlp-1 waits for:", s.Diagnose("nlp-1"))
	for _, e := range s.Schedule() {
		switch e.Kind {
		case allocator.EventPreempted:
			fmt.Printf("%s %s (by %s)\n", e.Kind, e.ID, e.By)
		case allocator.EventAdmitted:
			fmt.Printf("%s %s on %s %v\n", e.Kind, e.ID, e.Admission.Flavor, e.Admission.Nodes)
		}
	}
	// Output:
	// nlp-1 waits for: cohort
	// preempted vis-2 (by nlp-1)
	// admitted nlp-1 on h100 [gpu-2]
}

func ExampleEstimates() {
	now := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	s, err := allocator.NewSnapshot(exampleCluster(), now, []allocator.Workload{
		{ID: "train", Queue: "nlp", GPUs: 8, Duration: 4 * time.Hour, Created: now.Add(-3 * time.Hour),
			Admission: &allocator.Admission{Flavor: "h100", At: now.Add(-time.Hour), Nodes: []string{"gpu-1"}}},
		{ID: "tune", Queue: "vision", GPUs: 8, Duration: 2 * time.Hour, Created: now.Add(-time.Hour),
			Admission: &allocator.Admission{Flavor: "h100", At: now.Add(-30 * time.Minute), Nodes: []string{"gpu-2"}}},
		{ID: "eval", Queue: "vision", GPUs: 8, Duration: 2 * time.Hour, Created: now.Add(-30 * time.Minute)},
		{ID: "sweep", Queue: "vision", GPUs: 16, Duration: time.Hour, Created: now.Add(-20 * time.Minute)},
	}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	est := allocator.Estimates(s, allocator.EstimateOptions{
		// nlp's jobs run 50–100% of what they ask for; vision's use
		// DefaultRange (the same).
		Factors: map[string]allocator.Range{"nlp": {Low: 0.5, High: 1}},
	})
	ids := make([]string, 0, len(est))
	for id := range est {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		e := est[id]
		fmt.Printf("%s: #%d, waits for %s, starts in %v to %v\n", id, e.Position, e.Reason,
			e.Earliest.Sub(now), e.Latest.Sub(now))
	}
	// Output:
	// eval: #1, waits for cohort, starts in 30m0s to 1h30m0s
	// sweep: #2, waits for cohort, starts in 1h30m0s to 3h30m0s
}
