package simcluster_test

import (
	"fmt"
	"path/filepath"
	"strings"
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
	return newElasticWith(t, elasticFlavors)
}

func newElasticWith(t *testing.T, fs map[string]simcluster.ElasticFlavor) (*fixture, func() *simcluster.Cluster) {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &fixture{ctx: t.Context(), db: db, st: &flakyStore{db: db}, clock: clocktesting.NewFakeClock(t0)}
	open := func() *simcluster.Cluster {
		sim, _, err := simcluster.New(f.ctx, elasticCluster(), f.st, f.clock, simcluster.WithElastic(fs))
		if err != nil {
			t.Fatal(err)
		}
		return sim
	}
	f.sim = open()
	return f, open
}

func onDWS(id string, gpus int, d time.Duration) allocator.Workload {
	w := wl(id, gpus, 0, d)
	w.Flavor = "dws"
	return w
}

// advanceTo moves the clock to t0+d and returns the events on the way.
func (f *fixture) advanceTo(t *testing.T, d time.Duration) []string {
	t.Helper()
	f.at(d)
	evs, err := f.sim.Advance(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return events(evs)
}

// checkOf shows id's provisioning check as "State attempt N since +d: message".
func (f *fixture) checkOf(t *testing.T, id string) string {
	t.Helper()
	checks, err := f.sim.ProvisioningChecks(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := checks[id]
	if !ok {
		return "none"
	}
	s := fmt.Sprintf("%s attempt %d since %s", c.State, c.Attempt, rel(c.Since))
	if c.Message != "" {
		s += ": " + c.Message
	}
	return s
}

// Provisioned work holds its quota while its nodes are provisioned (as
// Kueue's QuotaReserved with the check Pending) without being admitted
// or running, is admitted onto them when they come and runs its time
// from then; a restart in between keeps it all.
func TestSimulatedProvisioning(t *testing.T) {
	f, reopen := newElastic(t)
	evs, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSubmit, Workload: onDWS("r1", 16, 4*time.Hour)})
	if err != nil || len(evs) != 0 {
		t.Fatalf("submit: %v, %v; want the quota reserved, no events", evs, err)
	}
	// The pool's quota is r1's: r2 waits for it.
	if evs, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSubmit, Workload: onDWS("r2", 8, time.Hour)}); err != nil || len(evs) != 0 {
		t.Fatalf("submit r2: %v, %v", events(evs), err)
	}
	snap, _ := f.sim.Snapshot(f.ctx)
	if got, ok := snap.Workload("r1"); !ok || got.Admission == nil || got.Admission.Flavor != "dws" {
		t.Fatalf("the snapshot has r1 = %+v, %v; want its dws quota reserved", got, ok)
	}
	if got, _ := snap.Workload("r2"); got.Admission != nil {
		t.Fatalf("r2 got %+v while r1 holds the dws quota", got.Admission)
	}
	checks, _ := f.sim.ProvisioningChecks(f.ctx)
	want := commands.CheckState{Check: "dws-check", State: commands.CheckPending, Attempt: 1, Since: t0, Nodes: 2}
	if d := cmp.Diff(want, checks["r1"]); d != "" {
		t.Errorf("check while provisioning (-want +got):\n%s", d)
	}
	if _, ok := checks["r2"]; ok {
		t.Errorf("r2, waiting for quota, has a check: %+v", checks["r2"])
	}
	if u, _ := f.sim.GPUUtilization(f.ctx, []string{"r1"}, time.Hour, t0.Add(10*time.Minute)); len(u) != 0 {
		t.Errorf("r1 is reported using GPUs while its nodes are provisioned: %+v", u)
	}
	if next := f.sim.NextEvent(); !next.Equal(t0.Add(20 * time.Minute)) {
		t.Errorf("NextEvent = %s, want +20m", rel(next))
	}
	f.sim = reopen()
	if got := f.advanceTo(t, 19*time.Minute); len(got) != 0 {
		t.Errorf("events before the nodes came: %s", got)
	}
	if d := cmp.Diff([]string{"admitted r1 at +20m0s on [d1 d2]"}, f.advanceTo(t, 30*time.Minute)); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if got := f.checkOf(t, "r1"); got != "Ready attempt 1 since +20m0s: simulated provisioning done" {
		t.Errorf("check after provisioning: %s", got)
	}
	// It runs its 4 hours from its admission, then r2 gets the quota.
	if d := cmp.Diff([]string{"finished r1 at +4h20m0s"}, f.advanceTo(t, 4*time.Hour+21*time.Minute)); d != "" {
		t.Errorf("events at the end (-want +got):\n%s", d)
	}
	if got := f.checkOf(t, "r2"); got != "Pending attempt 1 since +4h20m0s" {
		t.Errorf("r2's check once it has the quota: %s", got)
	}
}

// A failed attempt gives the quota back (others may take it), is retried
// after the ProvisioningRequestConfig's back-off, and the next attempt
// provisions; once the retries are spent the check is Rejected and the
// work holds nothing.
func TestSimulatedProvisioningFailsAndRetries(t *testing.T) {
	fs := map[string]simcluster.ElasticFlavor{"dws": {Check: "dws-check", Provisioning: 20 * time.Minute, FailAttempts: 1,
		Retry: commands.ProvisioningRetry{Limit: 2, Backoff: time.Minute, MaxBackoff: 10 * time.Minute}}}
	f, reopen := newElasticWith(t, fs)
	if _, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSubmit, Workload: onDWS("r1", 16, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got := f.advanceTo(t, 20*time.Minute); len(got) != 0 {
		t.Errorf("events when attempt 1 failed: %s", got)
	}
	const msg = "no capacity for 2 nodes of dws in the zone (simulated)"
	if got := f.checkOf(t, "r1"); got != "Retry attempt 1 since +20m0s: Retrying after failure: "+msg {
		t.Errorf("check after the failure: %s", got)
	}
	checks, _ := f.sim.ProvisioningChecks(f.ctx)
	if d := cmp.Diff([]commands.CheckFailure{{Attempt: 1, Message: msg}}, checks["r1"].Failed); d != "" {
		t.Errorf("failures (-want +got):\n%s", d)
	}
	// During the back-off the quota is free: r2 reserves it.
	if _, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSubmit, Workload: onDWS("r2", 16, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got := f.checkOf(t, "r2"); got != "Pending attempt 1 since +20m0s" {
		t.Errorf("r2 during r1's back-off: %s", got)
	}
	if _, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpRemove, ID: "r2"}); err != nil {
		t.Fatal(err)
	}
	f.sim = reopen()
	// Back-off 1m: attempt 2 at +21m, provisioned at +41m.
	f.advanceTo(t, 30*time.Minute)
	if got := f.checkOf(t, "r1"); got != "Pending attempt 2 since +21m0s" {
		t.Errorf("check after the back-off: %s", got)
	}
	if d := cmp.Diff([]string{"admitted r1 at +41m0s on [d1 d2]"}, f.advanceTo(t, time.Hour)); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}

	// Every attempt of r3 fails: 3 attempts (Limit 2 retries), back-offs
	// 1m then 2m, then Rejected.
	fs["dws"] = simcluster.ElasticFlavor{Check: "dws-check", Provisioning: 20 * time.Minute, FailureRate: 1,
		Retry: commands.ProvisioningRetry{Limit: 2, Backoff: time.Minute, MaxBackoff: 10 * time.Minute}}
	f, _ = newElasticWith(t, fs)
	if _, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSubmit, Workload: onDWS("r3", 8, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		at   time.Duration
		want string
	}{
		{20 * time.Minute, "Retry attempt 1 since +20m0s"},
		{21 * time.Minute, "Pending attempt 2 since +21m0s"},
		{41 * time.Minute, "Retry attempt 2 since +41m0s"},
		{43 * time.Minute, "Pending attempt 3 since +43m0s"},
		{63 * time.Minute, "Rejected attempt 3 since +1h3m0s: no capacity for 1 nodes of dws in the zone (simulated)"},
		{10 * time.Hour, "Rejected attempt 3 since +1h3m0s: no capacity for 1 nodes of dws in the zone (simulated)"},
	} {
		if got := f.advanceTo(t, step.at); len(got) != 0 {
			t.Errorf("events at %s: %s", step.at, got)
		}
		if got := f.checkOf(t, "r3"); !strings.HasPrefix(got, step.want) {
			t.Errorf("at %s: %s, want %s", step.at, got, step.want)
		}
	}
	snap, _ := f.sim.Snapshot(f.ctx)
	if w, ok := snap.Workload("r3"); !ok || w.Admission != nil {
		t.Errorf("rejected r3 in the snapshot: %+v, %v; want it there, pending", w, ok)
	}
	if _, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSubmit, Workload: onDWS("r4", 16, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got := f.checkOf(t, "r4"); !strings.HasPrefix(got, "Pending attempt 1") {
		t.Errorf("r4 beside rejected r3 (which holds no quota): %s", got)
	}
	// Switching the rejected work away forgets its check.
	w := wl("r3", 8, 0, time.Hour)
	w.Flavor = "spot"
	if evs, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSwitch, ID: "r3", Workload: w}); err != nil || len(evs) != 1 {
		t.Errorf("switching r3 to spot: %s, %v", events(evs), err)
	}
	if got := f.checkOf(t, "r3"); got != "none" {
		t.Errorf("r3's check after the switch: %s", got)
	}
}

// A failure rate draws each attempt's outcome from the seed, the
// workload and the attempt: the same seed gives the same outcomes, and a
// rate between 0 and 1 fails some and not others.
func TestSimulatedFailureRateIsSeeded(t *testing.T) {
	outcomes := func(seed int64) string {
		fs := map[string]simcluster.ElasticFlavor{"dws": {Check: "dws-check", Provisioning: 10 * time.Minute, FailureRate: 0.5, Seed: seed}}
		f, _ := newElasticWith(t, fs)
		var out []string
		for i := range 12 {
			id := fmt.Sprintf("w%d", i)
			f.at(time.Duration(i) * time.Hour)
			if _, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSubmit, Workload: onDWS(id, 8, 10*time.Hour)}); err != nil {
				t.Fatal(err)
			}
			f.advanceTo(t, time.Duration(i)*time.Hour+10*time.Minute+30*time.Second)
			c := f.checkOf(t, id)
			out = append(out, strings.Fields(c)[0])
			if _, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpRemove, ID: id}); err != nil {
				t.Fatal(err)
			}
		}
		return strings.Join(out, " ")
	}
	a, b, other := outcomes(7), outcomes(7), outcomes(8)
	if a != b {
		t.Errorf("seed 7 gave %s, then %s", a, b)
	}
	if !strings.Contains(a, "Retry") || !strings.Contains(a, "Ready") {
		t.Errorf("rate 0.5 gave %s; want some failures and some successes", a)
	}
	if a == other {
		t.Logf("seeds 7 and 8 happen to agree: %s", a)
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
