package simcluster_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/commands"
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
