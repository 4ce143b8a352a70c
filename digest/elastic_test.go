package digest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/digest"
	"github.com/gpubot/gpubot/records"
)

// The digest and the report tell elastic GPU-hours and their cost by
// team, each team's budget left this week, and the waiting the switches
// saved against their reserved estimates.
func TestElasticInDigestAndReport(t *testing.T) {
	e := newEnv(t)
	cl := cluster(4, map[string][2]int{"nlp": {16, 8}, "vision": {8, 8}, "speech": {8, -1}})
	cl.Flavors = append(cl.Flavors, allocator.Flavor{Name: "spot", GPUsPerNode: 8, Elastic: true})
	cl.Nodes = append(cl.Nodes, allocator.Node{Name: "spot-n1", Flavor: "spot", GPUs: 8, Block: "s", Rack: "s"})
	for i := range cl.Queues {
		cl.Queues[i].Flavors = append(cl.Queues[i].Flavors, "spot")
		cl.Queues[i].Quotas["spot"] = allocator.Quota{Nominal: 8}
	}
	set := settings
	set.Elastic = commands.ElasticSettings{
		Flavors:  []commands.FlavorTerms{{Flavor: "spot", Capacity: commands.CapacitySpot, PricePerGPUHour: 2}},
		Currency: "$", WeekStart: time.Monday,
		Budgets: map[string]commands.Budget{"nlp": {Money: 200}, "vision": {GPUHours: 100}},
	}
	// r7: switched to spot at 09:00 on Monday, when reserved capacity was
	// estimated at 16:00–20:00; admitted at 10:00, ran 4h: 8h saved.
	e.put(records.Request{ID: "r7", Requester: "alice", Team: "nlp", GPUs: 8, Flavor: "spot", Priority: "normal", Duration: 4 * time.Hour,
		State: records.StateFinished, CreatedAt: at(30, 8, 0), QueuedAt: at(30, 8, 0), AdmittedAt: at(30, 10, 0), EndedAt: at(30, 14, 0),
		AdmittedFlavor: "spot", EndReason: commands.EndTimeUp, Waits: []records.Wait{{From: at(30, 8, 0), To: at(30, 10, 0)}},
		Elastic: &records.Elastic{From: "h100", At: at(30, 9, 0), By: "alice",
			Reserved: &records.Estimate{At: at(30, 9, 0), Earliest: at(30, 16, 0), Latest: at(30, 20, 0), Known: true}}})
	e.use(records.UsageRecord{Request: "r7", Team: "nlp", Requester: "alice", Flavor: "spot", GPUs: 8, Start: at(30, 10, 0), End: at(30, 14, 0)})
	snap, err := allocator.NewSnapshot(cl, due, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := digest.New(set, digest.Sources{Cluster: snapshot{snap}, Requests: e.db, Usage: e.db, Audit: e.db, Samples: e.db})
	if err != nil {
		t.Fatal(err)
	}
	r, err := eng.Digest(e.ctx, "", due)
	if err != nil {
		t.Fatal(err)
	}
	has(t, text(r), "Elastic capacity yesterday: nlp 32 GPU-hours ≈ $64 (budget $136 left of $200 this week); vision 0 GPU-hours (budget 100 of 100 GPU-hours left this week). Waiting saved ≈ 8h by 1 switch to spot or provisioned capacity (against their reserved estimates).")
	// The team's own digest has only its own.
	r, err = eng.Digest(e.ctx, "vision", due)
	if err != nil {
		t.Fatal(err)
	}
	if got := text(r); strings.Contains(got, "nlp 32") {
		t.Errorf("vision's digest shows nlp's elastic use:\n%s", got)
	}
	rep, err := eng.Report(e.ctx, due)
	if err != nil {
		t.Fatal(err)
	}
	has(t, text(rep), "Elastic capacity this week: nlp 32 GPU-hours ≈ $64 (budget $136 left of $200 this week)", "Waiting saved ≈ 8h by 1 switch")
}
