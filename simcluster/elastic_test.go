package simcluster_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

// elasticCluster has one reserved node, two spot nodes and two nodes a
// provisioned flavor may get.
func elasticCluster() *allocator.Cluster {
	c := twoNodes()
	c.Nodes = c.Nodes[:1]
	c.Flavors = append(c.Flavors, allocator.Flavor{Name: "spot", GPUsPerNode: 8, Elastic: true}, allocator.Flavor{Name: "dws", GPUsPerNode: 8, Elastic: true})
	c.Nodes = append(c.Nodes,
		allocator.Node{Name: "s1", Flavor: "spot", GPUs: 8, Block: "sb", Rack: "sr"},
		allocator.Node{Name: "s2", Flavor: "spot", GPUs: 8, Block: "sb", Rack: "sr"},
		allocator.Node{Name: "d1", Flavor: "dws", GPUs: 8, Block: "db", Rack: "dr"},
		allocator.Node{Name: "d2", Flavor: "dws", GPUs: 8, Block: "db", Rack: "dr"})
	q := &c.Queues[0]
	q.Flavors = append(q.Flavors, "spot", "dws")
	q.Quotas["spot"] = allocator.Quota{Nominal: 16}
	q.Quotas["dws"] = allocator.Quota{Nominal: 16}
	return c
}

var elasticFlavors = map[string]simcluster.ElasticFlavor{
	"spot": {ReclaimAfter: 3 * time.Hour},
	"dws":  {Check: "dws-check", Provisioning: 20 * time.Minute},
}

func newElastic(t *testing.T) (*fixture, func() *simcluster.Cluster) {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &fixture{ctx: t.Context(), db: db, st: &flakyStore{db: db}, clock: clocktesting.NewFakeClock(t0)}
	open := func() *simcluster.Cluster {
		sim, _, err := simcluster.New(f.ctx, elasticCluster(), f.st, f.clock, simcluster.WithElastic(elasticFlavors))
		if err != nil {
			t.Fatal(err)
		}
		return sim
	}
	f.sim = open()
	return f, open
}

// Provisioned work waits for its nodes (its check Pending), is admitted
// onto them when they come, and the check says Ready; a restart in
// between keeps the held work.
func TestSimulatedProvisioning(t *testing.T) {
	f, reopen := newElastic(t)
	w := wl("r1", 16, 0, 4*time.Hour)
	w.Flavor = "dws"
	evs, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSubmit, Workload: w})
	if err != nil || len(evs) != 0 {
		t.Fatalf("submit: %v, %v; want held, no events", evs, err)
	}
	snap, _ := f.sim.Snapshot(f.ctx)
	if got, ok := snap.Workload("r1"); !ok || got.Admission != nil {
		t.Fatalf("the snapshot has r1 = %+v, %v; want it pending", got, ok)
	}
	checks, _ := f.sim.ProvisioningChecks(f.ctx)
	want := commands.CheckState{Check: "dws-check", State: commands.CheckPending, Attempt: 1, Since: t0, Nodes: 2, Message: "simulated provisioning"}
	if d := cmp.Diff(want, checks["r1"]); d != "" {
		t.Errorf("check while provisioning (-want +got):\n%s", d)
	}
	if next := f.sim.NextEvent(); !next.Equal(t0.Add(20 * time.Minute)) {
		t.Errorf("NextEvent = %s, want +20m", rel(next))
	}
	f.sim = reopen()
	f.at(19 * time.Minute)
	if evs, _ := f.sim.Advance(f.ctx); len(evs) != 0 {
		t.Errorf("events before the nodes came: %s", events(evs))
	}
	f.at(30 * time.Minute)
	evs, err = f.sim.Advance(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"admitted r1 at +20m0s on [d1 d2]"}, events(evs)); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	checks, _ = f.sim.ProvisioningChecks(f.ctx)
	if c := checks["r1"]; c.State != commands.CheckReady || !c.Since.Equal(t0.Add(20*time.Minute)) {
		t.Errorf("check after provisioning = %+v, want Ready since +20m", c)
	}
}

// Spot nodes are reclaimed from work that ran ReclaimAfter: it is
// requeued (no By, a Detail) and admitted again where there is room.
func TestSimulatedSpotReclaim(t *testing.T) {
	f, _ := newElastic(t)
	w := wl("r1", 8, 0, 10*time.Hour)
	w.Flavor = "spot"
	if _, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSubmit, Workload: w}); err != nil {
		t.Fatal(err)
	}
	f.at(4 * time.Hour)
	evs, err := f.sim.Advance(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) < 2 || evs[0].Kind != allocator.EventPreempted || evs[0].By != "" || evs[0].Detail == "" || !evs[0].At.Equal(t0.Add(3*time.Hour)) {
		t.Fatalf("events = %s (%+v); want r1 reclaimed at +3h with a detail, then admitted again", events(evs), evs)
	}
	if evs[1].Kind != allocator.EventAdmitted || evs[1].ID != "r1" {
		t.Errorf("after the reclaim: %s; want r1 admitted again", events(evs[1:]))
	}
}

// Switching moves a queued workload to another flavor: off the reserved
// queue and onto spot at once.
func TestSimulatedSwitch(t *testing.T) {
	f, _ := newElastic(t)
	if _, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSubmit, Workload: wl("big", 8, 0, 5*time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSubmit, Workload: wl("r2", 8, 0, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	w := wl("r2", 8, 0, time.Hour)
	w.Flavor = "spot"
	evs, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSwitch, ID: "r2", Workload: w})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"admitted r2 at +0s on [s1]"}, events(evs)); d != "" {
		t.Errorf("switch events (-want +got):\n%s", d)
	}
	// Switching to the provisioned flavor holds it instead.
	w.ID, w.Flavor = "r3", ""
	if _, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSubmit, Workload: w}); err != nil {
		t.Fatal(err)
	}
	w.Flavor = "dws"
	if evs, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSwitch, ID: "r3", Workload: w}); err != nil || len(evs) != 0 {
		t.Errorf("switch to dws: %s, %v; want held", events(evs), err)
	}
	if checks, _ := f.sim.ProvisioningChecks(f.ctx); checks["r3"].State != commands.CheckPending {
		t.Errorf("r3's check = %+v, want Pending", checks["r3"])
	}
	if _, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpRemove, ID: "r3"}); err != nil {
		t.Fatal(err)
	}
	if checks, _ := f.sim.ProvisioningChecks(f.ctx); len(checks) != 0 {
		t.Errorf("checks after removing r3: %+v, want none", checks)
	}
}
