package commands_test

import (
	"testing"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// TestEstimateOptionsArrivals: the bot's arrival rates keep what the
// estimates tell apart: the flavor asked for, the size, and how long
// each kind has been arriving.
func TestEstimateOptionsArrivals(t *testing.T) {
	now := t0.Add(10 * time.Hour)
	reqs := []records.Request{
		// One finished run teaches that runs take all they ask for.
		{ID: "r0", Team: "nlp", Priority: "normal", GPUs: 8, Duration: 2 * time.Hour, State: records.StateFinished,
			SubmittedAt: t0, AdmittedAt: t0, EndedAt: t0.Add(2 * time.Hour)},
		{ID: "r1", Team: "nlp", Priority: "high", GPUs: 8, Flavor: "h100", Duration: time.Hour, State: records.StateQueued,
			SubmittedAt: now.Add(-3 * time.Hour)},
		{ID: "r2", Team: "nlp", Priority: "high", GPUs: 2, Duration: time.Hour, State: records.StateQueued,
			SubmittedAt: now.Add(-time.Hour)},
	}
	opts := commands.EstimateOptions(reqs, now, 24*time.Hour, map[string]int32{"normal": 0, "high": 10})
	byKey := map[string]allocator.ArrivalRate{}
	for _, a := range opts.Arrivals {
		byKey[a.Flavor+"/"+string(rune('0'+a.Size))] = a
	}
	if len(opts.Arrivals) != 3 {
		t.Fatalf("arrivals %+v; want 3 kinds (r0, r1, r2)", opts.Arrivals)
	}
	if a, ok := byKey["h100/8"]; !ok || a.Priority != 10 || a.Over != 3*time.Hour {
		t.Errorf("r1's rate %+v (%v); want priority 10 on h100, 8 GPUs, arriving for 3h", a, ok)
	}
	if a, ok := byKey["/2"]; !ok || a.Priority != 10 || a.Over != time.Hour {
		t.Errorf("r2's rate %+v (%v); want priority 10 on any flavor, 2 GPUs, arriving for 1h", a, ok)
	}
}
