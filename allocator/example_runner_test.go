package allocator_test

import (
	"fmt"
	"time"

	"github.com/gpubot/gpubot/allocator"
)

// A trace replay: jobs arrive, run for what they actually take (not what
// they asked for), and the queue drains. Best-fit placement this time.
func ExampleRunner() {
	now := time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)
	c := exampleCluster()
	c.Policy.Placement = allocator.PlacementBestFit
	s, err := allocator.NewSnapshot(c, now, nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	actual := map[string]time.Duration{"a": 40 * time.Minute, "b": 2 * time.Hour, "c": time.Hour}
	r := allocator.NewRunner(s, func(w allocator.Workload) time.Time { return w.Admission.At.Add(actual[w.ID]) })
	show := func(evs []allocator.Event) {
		for _, e := range evs {
			fmt.Printf("%s %s %s\n", e.At.Format("15:04"), e.Kind, e.ID)
		}
	}
	for i, w := range []allocator.Workload{
		{ID: "a", Queue: "nlp", GPUs: 8, Duration: time.Hour},
		{ID: "b", Queue: "vision", GPUs: 8, Duration: 4 * time.Hour},
		{ID: "c", Queue: "nlp", GPUs: 8, Duration: time.Hour},
	} {
		at := now.Add(time.Duration(i) * 10 * time.Minute)
		show(r.Advance(at))
		w.Created = at
		if err := r.Add(w); err != nil {
			fmt.Println(err)
			return
		}
		show(r.Schedule())
	}
	show(r.Advance(now.Add(24 * time.Hour)))
	// Output:
	// 09:00 admitted a
	// 09:10 admitted b
	// 09:40 finished a
	// 09:40 admitted c
	// 10:40 finished c
	// 11:10 finished b
}
