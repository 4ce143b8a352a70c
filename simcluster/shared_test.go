package simcluster_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/simcluster"
)

// TestSharedSnapshotStaysAsHandedOut: SharedSnapshot hands out the
// current state itself (no copy until something changes), and no change
// after that, made or failed, touches it.
func TestSharedSnapshotStaysAsHandedOut(t *testing.T) {
	f := newFixture(t, twoNodes())
	if _, err := f.sim.Apply(f.ctx, submit(wl("w1", 8, 0, time.Hour))); err != nil {
		t.Fatal(err)
	}
	s1, err := f.sim.SharedSnapshot(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := f.sim.SharedSnapshot(f.ctx); again != s1 {
		t.Error("SharedSnapshot copied an unchanged state")
	}
	before, at := state(s1), s1.Now()

	f.at(10 * time.Minute)
	for _, op := range []commands.Op{submit(wl("w2", 16, 0, time.Hour)), extend("w1", 2*time.Hour), preempt("w2", "w1"), remove("w2"), advance} {
		s := step{at: 10 * time.Minute, op: op}
		if _, err := f.run(t, s); err != nil {
			t.Fatalf("%+v: %v", s.op, err)
		}
	}
	f.st.failPut = errors.New("disk full")
	f.at(3 * time.Hour)
	if _, err := f.sim.Apply(f.ctx, submit(wl("w3", 8, 0, time.Hour))); err == nil {
		t.Fatal("a failing save did not fail the change")
	}
	f.st.failPut = nil

	if diff := cmp.Diff(before, state(s1)); diff != "" {
		t.Errorf("the shared snapshot changed (-handed out +now):\n%s", diff)
	}
	if !s1.Now().Equal(at) {
		t.Errorf("the shared snapshot's time moved from %s to %s", rel(at), rel(s1.Now()))
	}
	s2, _ := f.sim.SharedSnapshot(f.ctx)
	if diff := cmp.Diff(f.state(t), state(s2)); diff != "" || s2 == s1 {
		t.Errorf("SharedSnapshot after the changes is not the cluster's state (-cluster +shared):\n%s", diff)
	}
}

// TestSharedSnapshotWithHeldWork: with provisioned work held (waiting out
// a failed attempt's back-off), SharedSnapshot's copy that adds it is
// made once for each state and handed out like the state itself: the same
// object until something changes, the cluster's state with the held work
// pending, and left as it was by the changes after it, made or failed.
func TestSharedSnapshotWithHeldWork(t *testing.T) {
	fs := map[string]simcluster.ElasticFlavor{"dws": {Check: "dws-check", Provisioning: 20 * time.Minute, FailAttempts: 1,
		Retry: commands.ProvisioningRetry{Limit: 2, Backoff: time.Hour, MaxBackoff: time.Hour}}}
	f, _ := newElasticWith(t, fs)
	if _, err := f.sim.Apply(f.ctx, commands.Op{Kind: commands.OpSubmit, Workload: onDWS("r1", 16, time.Hour)}); err != nil {
		t.Fatal(err)
	}
	f.advanceTo(t, 20*time.Minute) // attempt 1 fails: r1 is held for an hour
	s1, err := f.sim.SharedSnapshot(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := state(s1)
	if d := cmp.Diff([]string{"r1 pending"}, before); d != "" {
		t.Fatalf("the shared snapshot with r1 held (-want +got):\n%s", d)
	}
	if again, _ := f.sim.SharedSnapshot(f.ctx); again != s1 {
		t.Error("SharedSnapshot copied an unchanged state with held work again")
	}
	if own, _ := f.sim.Snapshot(f.ctx); own == s1 || !cmp.Equal(state(own), before) {
		t.Errorf("Snapshot with held work: the shared one, or another state: %v", state(own))
	}

	f.st.failPut = errors.New("disk full")
	if _, err := f.sim.Apply(f.ctx, submit(wl("w2", 8, 0, time.Hour))); err == nil {
		t.Fatal("a failing save did not fail the change")
	}
	f.st.failPut = nil
	if again, _ := f.sim.SharedSnapshot(f.ctx); again != s1 {
		t.Error("a change whose save failed replaced the shared snapshot")
	}
	if _, err := f.sim.Apply(f.ctx, submit(wl("w2", 8, 0, time.Hour))); err != nil {
		t.Fatal(err)
	}
	s2, _ := f.sim.SharedSnapshot(f.ctx)
	if s2 == s1 {
		t.Fatal("SharedSnapshot after a change handed out the state before it")
	}
	if d := cmp.Diff(f.state(t), state(s2)); d != "" {
		t.Errorf("SharedSnapshot after the change is not the cluster's state (-cluster +shared):\n%s", d)
	}
	if d := cmp.Diff(before, state(s1)); d != "" {
		t.Errorf("the shared snapshot changed (-handed out +now):\n%s", d)
	}
}
