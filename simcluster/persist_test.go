package simcluster_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

// ownerSaves is a cluster WithSavesByCaller over a real store, committed
// as the command service commits it.
type ownerSaves struct {
	ctx   context.Context
	db    *store.DB
	clock *clocktesting.FakeClock
	sim   *simcluster.Cluster
}

func openOwnerSaves(t *testing.T, path string, clk *clocktesting.FakeClock) *ownerSaves {
	t.Helper()
	db, err := store.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sim, _, err := simcluster.New(context.Background(), twoNodes(), db, clk, simcluster.WithSavesByCaller())
	if err != nil {
		t.Fatal(err)
	}
	return &ownerSaves{ctx: context.Background(), db: db, clock: clk, sim: sim}
}

// commit commits the unsaved change and returns the names written.
func (o *ownerSaves) commit(t *testing.T) []string {
	t.Helper()
	states, changed, err := o.sim.Unsaved()
	if err != nil || !changed {
		t.Fatalf("Unsaved = %d states, %v, %v; want a change", len(states), changed, err)
	}
	if _, err := o.db.Commit(o.ctx, records.Writes{States: states}, o.clock.Now()); err != nil {
		t.Fatal(err)
	}
	o.sim.Saved()
	var names []string
	for _, s := range states {
		n := s.Name
		if s.Data == nil {
			n = "-" + n
		}
		names = append(names, n)
	}
	return names
}

// reloaded is what a cluster started afresh on o's store holds.
func (o *ownerSaves) reloaded(t *testing.T) []string {
	t.Helper()
	sim, fresh, err := simcluster.New(o.ctx, twoNodes(), o.db, o.clock, simcluster.WithSavesByCaller())
	if err != nil || fresh {
		t.Fatalf("reloading: fresh %v, %v", fresh, err)
	}
	s, err := sim.Snapshot(o.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return append(state(s), "now "+rel(sim.Now()), fmt.Sprint(s.Usage()))
}

func (o *ownerSaves) current(t *testing.T) []string {
	t.Helper()
	s, err := o.sim.Snapshot(o.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return append(state(s), "now "+rel(o.sim.Now()), fmt.Sprint(s.Usage()))
}

// TestOwnerSavesTheChangeOnly: with the owner saving, a change writes the
// workloads it changed (and the rest of the state if that changed: here
// the clock does not move), not every workload;
// what a restart loads equals the cluster before it, after every change
// of a random run of submissions, removals, extensions and time passing.
func TestOwnerSavesTheChangeOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpubot.db")
	o := openOwnerSaves(t, path, clocktesting.NewFakeClock(t0))
	for i := range 6 {
		if _, err := o.sim.Apply(o.ctx, submit(wl(fmt.Sprintf("w%d", i), 8, 0, time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	o.commit(t)
	if _, err := o.sim.Apply(o.ctx, extend("w5", 3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, want := o.commit(t), []string{"simcluster.w.w5"}; !cmp.Equal(got, want) { // the time did not move: the meta is as saved
		t.Errorf("extending w5 wrote %v, want %v", got, want)
	}
	if _, err := o.sim.Apply(o.ctx, remove("w0")); err != nil { // w2 is admitted in its place
		t.Fatal(err)
	}
	if got, want := o.commit(t), []string{"-simcluster.w.w0", "simcluster.w.w2"}; !cmp.Equal(got, want) {
		t.Errorf("removing w0 wrote %v, want %v", got, want)
	}
	if _, changed, _ := o.sim.Unsaved(); changed {
		t.Errorf("Unsaved right after Saved reports a change")
	}

	rng := rand.New(rand.NewPCG(1, 2))
	next := 6
	for step := range 200 {
		switch k := rng.IntN(4); k {
		case 0:
			o.clock.Step(time.Duration(rng.IntN(90)) * time.Minute)
			if _, err := o.sim.Advance(o.ctx); err != nil {
				t.Fatal(err)
			}
		case 1:
			w := wl(fmt.Sprintf("w%d", next), 4*(1+rng.IntN(4)), int32(rng.IntN(3)), time.Duration(1+rng.IntN(4))*time.Hour)
			next++
			if _, err := o.sim.Apply(o.ctx, submit(w)); err != nil {
				t.Fatal(err)
			}
		case 2:
			if _, err := o.sim.Apply(o.ctx, remove(fmt.Sprintf("w%d", rng.IntN(next)))); err != nil {
				t.Fatal(err)
			}
		case 3:
			id := fmt.Sprintf("w%d", rng.IntN(next))
			if _, err := o.sim.Apply(o.ctx, extend(id, time.Duration(2+rng.IntN(4))*time.Hour)); err != nil &&
				!strings.Contains(err.Error(), id) {
				t.Fatal(err)
			}
		}
		if _, changed, _ := o.sim.Unsaved(); !changed {
			continue
		}
		o.commit(t)
		if diff := cmp.Diff(o.current(t), o.reloaded(t)); diff != "" {
			t.Fatalf("step %d: a restart loads another cluster (-before +after):\n%s", step, diff)
		}
	}
}

// TestOwnerSavesMigratesTheBlob: a store holding the cluster as one blob
// (an older gpubot, or one saved without WithSavesByCaller) loads as it
// was; the first save replaces the blob by the per-workload state, in one
// transaction, and removes per-workload names the blob does not have.
func TestOwnerSavesMigratesTheBlob(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpubot.db")
	clk := clocktesting.NewFakeClock(t0)
	o := openOwnerSaves(t, path, clk)
	if _, err := o.sim.Apply(o.ctx, submit(wl("stale", 8, 0, time.Hour))); err != nil {
		t.Fatal(err)
	}
	o.commit(t) // a per-workload name the blob below does not have
	old, _, err := simcluster.New(o.ctx, twoNodes(), &flakyStore{db: o.db}, clk)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := old.Apply(o.ctx, remove("stale")); err != nil { // saved as a blob
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if _, err := old.Apply(o.ctx, submit(wl(id, 8, 0, time.Hour))); err != nil {
			t.Fatal(err)
		}
	}
	snap, _ := old.Snapshot(o.ctx)
	want := append(state(snap), "now "+rel(old.Now()), fmt.Sprint(snap.Usage()))

	m := openOwnerSavesOn(t, o.db, clk)
	if diff := cmp.Diff(want, m.current(t)); diff != "" {
		t.Fatalf("the blob loads as another cluster (-blob +loaded):\n%s", diff)
	}
	got := m.commit(t)
	for _, name := range []string{"simcluster.w.a", "simcluster.w.b", "simcluster.w.c", "simcluster.meta", "-simcluster", "-simcluster.w.stale"} {
		if !strings.Contains(" "+strings.Join(got, " ")+" ", " "+name+" ") {
			t.Errorf("the first save wrote %v, lacking %s", got, name)
		}
	}
	if _, err := o.db.GetState(o.ctx, simcluster.StateName); !errors.Is(err, records.ErrNotFound) {
		t.Errorf("the blob is still there after the first save: %v", err)
	}
	if diff := cmp.Diff(want, m.reloaded(t)); diff != "" {
		t.Errorf("after migrating, a restart loads another cluster (-blob +loaded):\n%s", diff)
	}
	ws, err := simcluster.SavedWorkloads(o.ctx, o.db)
	if err != nil || len(ws) != 3 {
		t.Errorf("SavedWorkloads = %d workloads, %v; want a, b, c", len(ws), err)
	}
}

func openOwnerSavesOn(t *testing.T, db *store.DB, clk *clocktesting.FakeClock) *ownerSaves {
	t.Helper()
	sim, fresh, err := simcluster.New(context.Background(), twoNodes(), db, clk, simcluster.WithSavesByCaller())
	if err != nil || fresh {
		t.Fatalf("New: fresh %v, %v", fresh, err)
	}
	return &ownerSaves{ctx: context.Background(), db: db, clock: clk, sim: sim}
}

// TestOwnerDiscardGoesBackToTheStore: a change whose commit failed is
// dropped: the cluster is as stored, and the next change's save writes
// what changed since then (not what was dropped).
func TestOwnerDiscardGoesBackToTheStore(t *testing.T) {
	o := openOwnerSaves(t, filepath.Join(t.TempDir(), "gpubot.db"), clocktesting.NewFakeClock(t0))
	if _, err := o.sim.Apply(o.ctx, submit(wl("a", 8, 0, time.Hour))); err != nil {
		t.Fatal(err)
	}
	o.commit(t)
	before := o.current(t)
	if _, err := o.sim.Apply(o.ctx, submit(wl("dropped", 8, 0, time.Hour))); err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.sim.Unsaved(); err != nil {
		t.Fatal(err)
	}
	if err := o.sim.Discard(o.ctx); err != nil { // as after a failed commit
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, o.current(t)); diff != "" {
		t.Errorf("after Discard (-stored +cluster):\n%s", diff)
	}
	if _, err := o.sim.Apply(o.ctx, submit(wl("b", 8, 0, time.Hour))); err != nil {
		t.Fatal(err)
	}
	if got, want := o.commit(t), []string{"simcluster.w.b"}; !cmp.Equal(got, want) {
		t.Errorf("the save after Discard wrote %v, want %v", got, want)
	}
	if diff := cmp.Diff(o.current(t), o.reloaded(t)); diff != "" {
		t.Errorf("a restart loads another cluster (-before +after):\n%s", diff)
	}
}

// TestOwnerSavesNeedsAKeyedStore: a store that cannot keep per-workload
// state is refused at New, not at the first save.
func TestOwnerSavesNeedsAKeyedStore(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, _, err = simcluster.New(context.Background(), twoNodes(), &flakyStore{db: db}, clocktesting.NewFakeClock(t0), simcluster.WithSavesByCaller())
	if err == nil || !strings.Contains(err.Error(), "per-workload") {
		t.Errorf("New WithSavesByCaller on a blob-only store = %v; want a refusal", err)
	}
}

// TestOwnerSavesAChangeMadeBeforeSaved: a change made between Unsaved
// and Saved stays unsaved, and the next Unsaved writes it (the workload
// it touched included, though an earlier change to it was saved).
func TestOwnerSavesAChangeMadeBeforeSaved(t *testing.T) {
	o := openOwnerSaves(t, filepath.Join(t.TempDir(), "gpubot.db"), clocktesting.NewFakeClock(t0))
	if _, err := o.sim.Apply(o.ctx, submit(wl("a", 8, 0, time.Hour))); err != nil {
		t.Fatal(err)
	}
	states, _, err := o.sim.Unsaved()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.sim.Apply(o.ctx, extend("a", 5*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := o.db.Commit(o.ctx, records.Writes{States: states}, o.clock.Now()); err != nil {
		t.Fatal(err)
	}
	o.sim.Saved()
	if got, want := o.commit(t), []string{"simcluster.w.a"}; !cmp.Equal(got, want) {
		t.Errorf("the change made before Saved wrote %v, want %v", got, want)
	}
	if diff := cmp.Diff(o.current(t), o.reloaded(t)); diff != "" {
		t.Errorf("a restart loads another cluster (-before +after):\n%s", diff)
	}
}
