package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/gpubot/gpubot/records"
)

func zombie(req string, since time.Time, mods ...func(*records.Zombie)) records.Zombie {
	z := records.Zombie{
		Request: req, Workload: "nlp/gpubot-" + req, Team: "nlp", Owner: "alice", Flavor: "h100", GPUs: 8,
		Kind: records.ZombieIdle, Detail: "busiest GPU at 2%", Since: since, FoundAt: since.Add(30 * time.Minute),
	}
	for _, m := range mods {
		m(&z)
	}
	return z
}

func resolved(outcome records.ZombieOutcome, at time.Time) func(*records.Zombie) {
	return func(z *records.Zombie) { z.Outcome, z.ResolvedAt, z.ResolvedBy = outcome, at, "gpubot" }
}

// New zombies get z1, z2, … in order, survive a reopen, and are updated
// in place; an update of an ID the store never gave is refused.
func TestPutZombie(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/gpubot.db"
	db := mustOpenPath(t, path)
	a, err := db.PutZombie(ctx, zombie("r1", t0))
	if err != nil {
		t.Fatal(err)
	}
	b, err := db.PutZombie(ctx, zombie("r2", t0))
	if err != nil {
		t.Fatal(err)
	}
	if a.ID != "z1" || b.ID != "z2" {
		t.Fatalf("IDs %q, %q; want z1, z2", a.ID, b.ID)
	}
	b.OwnerToldAt = t0.Add(time.Hour)
	b.Outcome, b.ResolvedAt, b.ResolvedBy = records.ZombieKept, t0.Add(2*time.Hour), "alice"
	if _, err := db.PutZombie(ctx, b); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"z3", "r1", "z0", "z01", "", "z"} {
		z := zombie("r9", t0)
		z.ID = id
		if id == "" {
			continue
		}
		if _, err := db.PutZombie(ctx, z); !errors.Is(err, ErrNotFound) {
			t.Errorf("PutZombie with ID %q: %v, want ErrNotFound", id, err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = mustOpenPath(t, path)
	got, err := db.GetZombie(ctx, "z2")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(b, got); diff != "" {
		t.Errorf("z2 after reopen (-want +got):\n%s", diff)
	}
	if _, err := db.GetZombie(ctx, "z9"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetZombie(z9): %v, want ErrNotFound", err)
	}
	c, err := db.PutZombie(ctx, zombie("r3", t0))
	if err != nil || c.ID != "z3" {
		t.Fatalf("third zombie after reopen: %q, %v; want z3", c.ID, err)
	}
}

// Zombies returns exactly those whose waste overlaps [from, to).
func TestZombiesOverlap(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	h := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Hour) }
	for _, z := range []records.Zombie{
		zombie("r1", h(0), resolved(records.ZombieAutoReleased, h(2))), // z1: [0h, 2h)
		zombie("r2", h(1)), // z2: open since 1h
		zombie("r3", h(5), resolved(records.ZombieKept, h(6))),              // z3: [5h, 6h)
		zombie("r4", h(-3), resolved(records.ZombieRecovered, h(-1))),       // z4: [-3h, -1h)
		zombie("r5", h(3), func(z *records.Zombie) { z.ResolvedAt = h(4) }), // z5: open (no outcome) though a time is set
	} {
		if _, err := db.PutZombie(ctx, z); err != nil {
			t.Fatal(err)
		}
	}
	for name, tc := range map[string]struct {
		from, to time.Time
		want     []string
	}{
		"all":                     {h(-10), h(10), []string{"r1", "r2", "r3", "r4", "r5"}},
		"first hour":              {h(0), h(1), []string{"r1"}},
		"ends where one starts":   {h(-1), h(0), nil},
		"starts where one ends":   {h(2), h(3), []string{"r2"}},
		"later: open ones":        {h(20), h(21), []string{"r2", "r5"}},
		"inside one":              {h(5).Add(time.Minute), h(5).Add(2 * time.Minute), []string{"r2", "r3", "r5"}},
		"empty interval":          {h(1), h(1), nil},
		"reversed interval":       {h(2), h(1), nil},
		"before anything started": {h(-20), h(-4), nil},
	} {
		t.Run(name, func(t *testing.T) {
			zs, err := db.Zombies(ctx, tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, z := range zs {
				got = append(got, z.Request)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A value that does not decode, or holds another zombie, is reported as
// ErrCorrupt naming the bucket and key.
func TestZombiesCorrupt(t *testing.T) {
	ctx := context.Background()
	for name, value := range map[string]string{"not JSON": "{", "another ID": `{"id":"z7"}`} {
		t.Run(name, func(t *testing.T) {
			db := mustOpen(t)
			if _, err := db.PutZombie(ctx, zombie("r1", t0)); err != nil {
				t.Fatal(err)
			}
			err := db.bolt.Update(func(tx *bolt.Tx) error {
				return tx.Bucket(bucketZombies).Put(seqKey(1), []byte(value))
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Zombies(ctx, t0, t0.Add(time.Hour)); !errors.Is(err, ErrCorrupt) {
				t.Errorf("Zombies: %v, want ErrCorrupt", err)
			}
			if _, err := db.GetZombie(ctx, "z1"); !errors.Is(err, ErrCorrupt) {
				t.Errorf("GetZombie: %v, want ErrCorrupt", err)
			}
			// Repair it so that the cleanup's invariant check passes.
			_ = db.bolt.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketZombies).Delete(seqKey(1)) })
		})
	}
}

// Closed stores and cancelled contexts are refused before any work.
func TestZombiesClosedAndCancelled(t *testing.T) {
	db := mustOpen(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := db.PutZombie(ctx, zombie("r1", t0)); !errors.Is(err, context.Canceled) {
		t.Errorf("PutZombie with a cancelled context: %v", err)
	}
	db.Close()
	if _, err := db.Zombies(context.Background(), t0, t0.Add(time.Hour)); !errors.Is(err, ErrClosed) {
		t.Errorf("Zombies after Close: %v", err)
	}
}
