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
