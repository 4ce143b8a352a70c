package simcluster_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

// kindsFlavors make provisioning attempts fail half the time (with
// Kueue's retries, then a rejection) and reclaim spot nodes after two
// hours.
var kindsFlavors = map[string]simcluster.ElasticFlavor{
	"spot": {ReclaimAfter: 2 * time.Hour},
	"dws": {Check: "dws-check", Provisioning: 20 * time.Minute, FailureRate: 0.5, Seed: 7,
		Retry: commands.ProvisioningRetry{Limit: 1, Backoff: 10 * time.Minute, MaxBackoff: time.Hour}},
}

// everything is all a restart must get back: every workload in full
// (with the held ones), the time, the usage, the provisioning checks, the
// simulated use (the profiles) and the next event (which the profiles'
// pods reports and the checks' due times decide).
type whole struct {
	Workloads []allocator.Workload
	Now, Next time.Time
	Usage     map[string]float64
	Checks    map[string]commands.CheckState
	Use       map[string]commands.Utilized
}

func everything(t *testing.T, ctx context.Context, sim *simcluster.Cluster) whole {
	t.Helper()
	s, err := sim.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ws := s.Workloads()
	ids := make([]string, len(ws))
	for i, w := range ws {
		ids[i] = w.ID
	}
	checks, err := sim.ProvisioningChecks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	use, err := sim.GPUUtilization(ctx, ids, time.Hour, sim.Now())
	if err != nil {
		t.Fatal(err)
	}
	return whole{Workloads: ws, Now: sim.Now(), Next: sim.NextEvent(), Usage: s.Usage(), Checks: checks, Use: use}
}

// TestOwnerSavesEveryKindOfChange: a random run of every kind of change
// the simulated cluster makes (submissions that are admitted or wait,
// preemptions, ends, cancellations, extensions, flavor switches that
// requeue, running work seeded, profiles and pods reported not ready,
// provisioning attempts that succeed, fail, retry and are rejected, spot
// reclaims that requeue), each committed as the command service commits
// it: after every step a restart loads the cluster as it was. A change
// whose workload is not marked touched (track.go) is not written, and
// the restart then differs. The run is checked to have made every kind.
func TestOwnerSavesEveryKindOfChange(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(filepath.Join(t.TempDir(), "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	clk := clocktesting.NewFakeClock(t0)
	open := func() *simcluster.Cluster {
		sim, _, err := simcluster.New(ctx, elasticCluster(), db, clk, simcluster.WithSavesByCaller(), simcluster.WithElastic(kindsFlavors))
		if err != nil {
			t.Fatal(err)
		}
		return sim
	}
	sim := open()
	seen := map[string]int{}
	commit := func() []string {
		states, changed, err := sim.Unsaved()
		if err != nil {
			t.Fatal(err)
		}
		if !changed {
			return nil
		}
		if _, err := db.Commit(ctx, records.Writes{States: states}, clk.Now()); err != nil {
			t.Fatal(err)
		}
		sim.Saved()
		var names []string
		for _, s := range states {
			names = append(names, s.Name)
		}
		return names
	}
	note := func(evs []allocator.Event) {
		for _, ev := range evs {
			k := string(ev.Kind)
			switch {
			case ev.Kind == allocator.EventPreempted && ev.By != "":
				k += " by a preemptor"
			case ev.Kind == allocator.EventPreempted && strings.Contains(ev.Detail, "spot"):
				k += " by a spot reclaim"
			case ev.Kind == allocator.EventAdmitted && ev.Admission != nil:
				k += " on " + ev.Admission.Flavor
			}
			seen[k]++
		}
	}
	pick := func(rng *rand.Rand, admitted bool) (allocator.Workload, bool) {
		s, _ := sim.Snapshot(ctx)
		var ws []allocator.Workload
		for _, w := range s.Workloads() {
			if (w.Admission != nil) == admitted {
				ws = append(ws, w)
			}
		}
		if len(ws) == 0 {
			return allocator.Workload{}, false
		}
		return ws[rng.IntN(len(ws))], true
	}
	flavors := []string{"", "h100", "spot", "dws", "dws"}
	rng := rand.New(rand.NewPCG(3, 4))
	next := 0
	for step := range 400 {
		var evs []allocator.Event
		var err error
		kind := rng.IntN(9)
		moved := false
		switch kind {
		case 0, 1:
			d := time.Duration(rng.IntN(50)) * time.Minute
			moved = d > 0
			clk.Step(d)
			evs, err = sim.Advance(ctx)
		case 2: // a request, admitted or waiting
			w := wl(fmt.Sprintf("w%d", next), 4*(1+rng.IntN(2)), int32(rng.IntN(3)), time.Duration(1+rng.IntN(4))*time.Hour)
			w.Flavor = flavors[rng.IntN(len(flavors))]
			w.Created = clk.Now()
			next++
			evs, err = sim.Apply(ctx, submit(w))
		case 3: // running work seeded
			w := wl(fmt.Sprintf("w%d", next), 4, 0, 3*time.Hour)
			w.Flavor, w.Created = "h100", clk.Now()
			w.Admission = &allocator.Admission{Flavor: "h100", At: clk.Now()}
			next++
			if evs, err = sim.Apply(ctx, submit(w)); err == nil {
				seen["seeded"]++
			}
		case 4: // a cancellation
			if w, ok := pick(rng, rng.IntN(2) == 0); ok {
				evs, err = sim.Apply(ctx, remove(w.ID))
				seen["cancelled"]++
			}
		case 5:
			if w, ok := pick(rng, true); ok {
				evs, err = sim.Apply(ctx, extend(w.ID, w.Duration+time.Hour))
				seen["extended"]++
			}
		case 6: // an admin's preemption
			if w, ok := pick(rng, false); ok {
				s, _ := sim.Snapshot(ctx)
				if victims, _, ok := s.ProposeVictims(w); ok && len(victims) > 0 {
					evs, err = sim.Apply(ctx, preempt(w.ID, victims...))
				}
			}
		case 7: // a switch to another flavor: requeued
			if w, ok := pick(rng, rng.IntN(2) == 0); ok {
				w.Admission, w.Flavor = nil, flavors[1+rng.IntN(len(flavors)-1)]
				if evs, err = sim.Apply(ctx, commands.Op{Kind: commands.OpSwitch, ID: w.ID, Workload: w}); err == nil {
					seen["switched"]++
				}
			}
		case 8:
			if w, ok := pick(rng, true); ok {
				p := simcluster.Profile{PodsNeverReady: rng.IntN(2) == 0}
				if !p.PodsNeverReady {
					u := float64(rng.IntN(100))
					p.GPUUtilization = &u
				}
				if err = sim.SetProfile(ctx, w.ID, p); err == nil {
					seen["profiled"]++
				}
			}
		}
		if err != nil && kind != 3 && kind != 6 { // seeds and preemptions may not fit
			t.Fatalf("step %d (kind %d): %v", step, kind, err)
		}
		note(evs)
		checks, _ := sim.ProvisioningChecks(ctx)
		for _, ch := range checks {
			seen["check "+ch.State]++
		}
		names := commit()
		if moved && !slices.Contains(names, "simcluster.meta") {
			t.Errorf("step %d: time moved, but the commit wrote %v", step, names)
		}
		before := everything(t, ctx, sim)
		sim = open() // a restart, from here on
		if diff := cmp.Diff(before, everything(t, ctx, sim)); diff != "" {
			t.Fatalf("step %d (kind %d, events %v): a restart loads another cluster (-before +after):\n%s", step, kind, events(evs), diff)
		}
	}
	for _, k := range []string{"admitted on h100", "admitted on spot", "admitted on dws", "seeded", "preempted by a preemptor",
		"preempted by a spot reclaim", "finished", "cancelled", "extended", "switched", "profiled", "pods-not-ready",
		"check " + commands.CheckPending, "check " + commands.CheckReady, "check " + commands.CheckRetry, "check " + commands.CheckRejected} {
		if seen[k] == 0 {
			t.Errorf("the run made no %q; it made %v", k, seen)
		}
	}
}
