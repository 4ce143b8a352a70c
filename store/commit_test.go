package store

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/records"
)

// TestCommitIsAllOrNothing: a decision's writes land together, with its
// outbox messages in order; one bad write leaves nothing of the rest.
func TestCommitIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	db, err := Open(filepath.Join(t.TempDir(), "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	zid, err := db.NextZombieID(ctx)
	if err != nil || zid != "z1" {
		t.Fatalf("NextZombieID = %q, %v", zid, err)
	}
	w := records.Writes{
		Requests: []records.Request{{ID: "r1", State: records.StateFinished}},
		Audit:    []records.AuditEntry{{At: at, Actor: "alice", Action: "release", Target: "r1", Outcome: "ok"}},
		Usage:    []records.UsageRecord{{Request: "r1", Team: "nlp", GPUs: 8, Start: at.Add(-time.Hour), End: at}},
		Zombies:  []records.Zombie{{ID: zid, Request: "r1", Outcome: records.ZombieReleasedByOwner}},
		States:   []records.NamedState{{Name: "simcluster", Data: []byte(`{"version":1}`)}},
		Runs:     []records.JobRun{{Job: "digest", Due: at, At: at}},
		Outbox:   [][]byte{[]byte("card"), []byte("thread")},
	}
	seqs, err := db.Commit(ctx, w, at)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]uint64{1, 2}, seqs); diff != "" {
		t.Errorf("outbox sequence numbers (-want +got):\n%s", diff)
	}
	if r, err := db.GetRequest(ctx, "r1"); err != nil || r.State != records.StateFinished {
		t.Errorf("r1 = %+v, %v", r, err)
	}
	if us, _ := db.Usage(ctx, at.Add(-2*time.Hour), at.Add(time.Hour)); len(us) != 1 {
		t.Errorf("usage = %v", us)
	}
	if z, err := db.GetZombie(ctx, "z1"); err != nil || z.Request != "r1" {
		t.Errorf("z1 = %+v, %v", z, err)
	}
	if st, err := db.GetState(ctx, "simcluster"); err != nil || string(st) != `{"version":1}` {
		t.Errorf("state = %q, %v", st, err)
	}
	out, err := db.Outbox(ctx)
	if err != nil || len(out) != 2 || string(out[0].Message) != "card" || string(out[1].Message) != "thread" || !out[0].At.Equal(at) {
		t.Fatalf("outbox = %+v, %v", out, err)
	}
	if err := db.Delivered(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if out, _ := db.Outbox(ctx); len(out) != 1 || out[0].Seq != 2 {
		t.Errorf("outbox after delivering 1 = %+v", out)
	}

	// A run due before the recorded one spoils the whole commit.
	bad := records.Writes{
		Requests: []records.Request{{ID: "r2", State: records.StateQueued}},
		Runs:     []records.JobRun{{Job: "digest", Due: at.Add(-time.Hour), At: at}},
		Outbox:   [][]byte{[]byte("never")},
	}
	if _, err := db.Commit(ctx, bad, at); err == nil {
		t.Fatal("a commit with a run back in time succeeded")
	}
	if _, err := db.GetRequest(ctx, "r2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("r2 after the failed commit: %v, want not found", err)
	}
	if out, _ := db.Outbox(ctx); len(out) != 1 {
		t.Errorf("outbox after the failed commit = %+v", out)
	}
	if next, _ := db.NextZombieID(ctx); next != "z2" {
		t.Errorf("next zombie ID %q, want z2", next)
	}
	if rep, err := Check(db.Path()); err == nil {
		t.Errorf("Check of an open store: %+v", rep)
	}
}
