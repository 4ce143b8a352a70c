package store

import (
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"

	"github.com/gpubot/gpubot/records"
)

func TestJobRunsSurviveReopening(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gpubot.db")
	db := mustOpenPath(t, path)
	if _, err := db.LastRun(ctx, "digest:#gpu"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("LastRun of a new job = %v, want ErrNotFound", err)
	}
	base := records.JobRun{Job: "digest:#gpu", Due: t0, At: t0, Baseline: true}
	if err := db.PutRun(ctx, base); err != nil {
		t.Fatal(err)
	}
	next := records.JobRun{Job: "digest:#gpu", Due: t0.Add(24 * time.Hour), At: t0.Add(25 * time.Hour), Late: true}
	if err := db.PutRun(ctx, next); err != nil {
		t.Fatal(err)
	}
	if err := db.PutRun(ctx, records.JobRun{Job: "digest:#gpu", Due: t0}); err == nil {
		t.Error("PutRun moved the job back in time")
	}
	if err := db.PutRun(ctx, records.JobRun{}); err == nil {
		t.Error("PutRun accepted a run without a job")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	again := mustOpenPath(t, path)
	got, err := again.LastRun(ctx, "digest:#gpu")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(next, got); d != "" {
		t.Errorf("LastRun after reopening (-want +got):\n%s", d)
	}
}

func TestSamplesByTime(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	for i := range 6 {
		s := records.Sample{At: t0.Add(time.Duration(i) * 10 * time.Minute), Pending: i,
			Flavors: []records.FlavorSample{{Flavor: "h100", GPUs: 16, Free: i, Fragmented: float64(i) / 2}}}
		if err := db.AppendSample(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// The same At again replaces.
	if err := db.AppendSample(ctx, records.Sample{At: t0.Add(20 * time.Minute), Pending: 99}); err != nil {
		t.Fatal(err)
	}
	got, err := db.Samples(ctx, t0.Add(10*time.Minute), t0.Add(40*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var pending []int
	for _, s := range got {
		pending = append(pending, s.Pending)
	}
	if d := cmp.Diff([]int{1, 99, 3}, pending); d != "" {
		t.Errorf("samples in [10m, 40m) by pending (-want +got):\n%s", d)
	}
	if got, _ := db.Samples(ctx, t0, t0); got != nil {
		t.Errorf("empty range gave %d samples", len(got))
	}
	if err := db.AppendSample(ctx, records.Sample{At: time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)}); err == nil {
		t.Error("a sample before 1970 was accepted")
	}
}

func TestAuditRangeAndFirst(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	if _, err := db.FirstAudit(ctx); !errors.Is(err, ErrNotFound) {
		t.Fatalf("FirstAudit of an empty log = %v, want ErrNotFound", err)
	}
	for i := range 5 {
		if _, err := db.AppendAudit(ctx, records.AuditEntry{At: t0.Add(time.Duration(i) * time.Hour), Actor: "gpubot", Action: "seed", Outcome: "ok"}); err != nil {
			t.Fatal(err)
		}
	}
	first, err := db.FirstAudit(ctx)
	if err != nil || first.Seq != 1 || !first.At.Equal(t0) {
		t.Errorf("FirstAudit = %+v, %v; want seq 1 at %s", first, err, t0)
	}
	got, err := db.AuditRange(ctx, t0.Add(time.Hour), t0.Add(3*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Seq != 2 || got[1].Seq != 3 {
		t.Errorf("AuditRange [1h, 3h) = %+v; want seqs 2 and 3", got)
	}
}

// TestCheckDecodesJobsAndSamples: Check counts the job runs and samples
// and reports one that does not decode, or contradicts its key.
func TestCheckDecodesJobsAndSamples(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gpubot.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutRun(ctx, records.JobRun{Job: "sample cluster", Due: t0, At: t0}); err != nil {
		t.Fatal(err)
	}
	if err := db.AppendSample(ctx, records.Sample{At: t0}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Check(path)
	if err != nil || !rep.OK() || rep.Records["jobs"] != 1 || rep.Records["samples"] != 1 {
		t.Fatalf("Check = %+v, %v; want one job run and one sample, no problems", rep, err)
	}

	b, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketJobs).Put([]byte("digest"), []byte(`{"job":"other"}`)); err != nil {
			return err
		}
		return tx.Bucket(bucketSamples).Put(binary.BigEndian.AppendUint64(nil, uint64(t0.Add(time.Minute).UnixNano())), []byte(`{"at":"2025-03-01T09:00:00Z"}`))
	})
	b.Close()
	if err != nil {
		t.Fatal(err)
	}
	rep, err = Check(path)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check of damaged records = %v, want ErrCorrupt", err)
	}
	got := strings.Join(rep.Problems, "\n")
	for _, want := range []string{`bucket jobs at key "digest": record is for job "other"`, "bucket samples at key 2025-03-01T09:01:00Z: record is of 2025-03-01T09:00:00Z"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems lack %q:\n%s", want, got)
		}
	}
}
