package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/gpubot/gpubot/records"
)

// use returns a usage record of request id from t0+start to t0+end hours.
func use(id string, start, end float64) records.UsageRecord {
	h := func(x float64) time.Time { return t0.Add(time.Duration(x * float64(time.Hour))) }
	return records.UsageRecord{
		Request: id, Team: "vision", Requester: "ana", Flavor: "h100", GPUs: 8,
		Start: h(start), End: h(end),
	}
}

func TestUsage(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	recs := map[string]records.UsageRecord{
		"r1": use("r1", 0, 1),
		"r2": use("r2", 1, 2),
		"r3": use("r3", 0, 10), // long: ends long after windows it overlaps
		"r4": use("r4", 2, 3),
		"r5": use("r5", 1, 2), // ends with r2: ordered after it by request
		"r6": use("r6", 5, 5), // zero length
	}
	for _, u := range recs {
		if err := db.AppendUsage(ctx, u); err != nil {
			t.Fatal(err)
		}
	}

	h := func(x float64) time.Time { return t0.Add(time.Duration(x * float64(time.Hour))) }
	tests := map[string]struct {
		from, to time.Time
		want     []string
	}{
		"edges: ends at from, starts at to": {h(1), h(2), []string{"r2", "r5", "r3"}},
		"first hour":                        {h(0), h(1), []string{"r1", "r3"}},
		"inside one record":                 {h(2.5), h(2.6), []string{"r4", "r3"}},
		"zero-length record inside":         {h(4), h(6), []string{"r6", "r3"}},
		"only the long one":                 {h(9), h(9.5), []string{"r3"}},
		"before everything":                 {h(-5), h(0), nil},
		"after everything":                  {h(20), h(30), nil},
		"all time":                          {time.Time{}, time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), []string{"r1", "r2", "r5", "r4", "r6", "r3"}},
		"empty window":                      {h(1), h(1), nil},
		"reversed window":                   {h(2), h(1), nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := db.Usage(ctx, tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			var want []records.UsageRecord
			for _, id := range tc.want {
				want = append(want, recs[id])
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Usage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAppendUsageIdempotent(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	appendAll := func(us ...records.UsageRecord) {
		t.Helper()
		for _, u := range us {
			if err := db.AppendUsage(ctx, u); err != nil {
				t.Fatal(err)
			}
		}
	}
	all := func() []records.UsageRecord {
		t.Helper()
		got, err := db.Usage(ctx, t0.Add(-time.Hour), t0.Add(24*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	appendAll(use("r1", 0, 1), use("r1", 0, 1), use("r1", 0, 1))
	if diff := cmp.Diff([]records.UsageRecord{use("r1", 0, 1)}, all()); diff != "" {
		t.Errorf("after a repeated append (-want +got):\n%s", diff)
	}

	// Same request and start, corrected end: replaces.
	appendAll(use("r1", 0, 1.5))
	if diff := cmp.Diff([]records.UsageRecord{use("r1", 0, 1.5)}, all()); diff != "" {
		t.Errorf("after a corrected end (-want +got):\n%s", diff)
	}

	// Same request, another start (preempted, then admitted again): a
	// second stretch.
	appendAll(use("r1", 3, 4))
	if diff := cmp.Diff([]records.UsageRecord{use("r1", 0, 1.5), use("r1", 3, 4)}, all()); diff != "" {
		t.Errorf("after a second stretch (-want +got):\n%s", diff)
	}
}

func TestAppendUsageRefuses(t *testing.T) {
	tests := map[string]records.UsageRecord{
		"no request":       {Start: t0, End: t0.Add(time.Hour)},
		"end before start": use("r1", 2, 1),
		"zero start":       {Request: "r1", End: t0},
		"zero end":         {Request: "r1", Start: t0},
		"before 1970":      {Request: "r1", Start: time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC), End: t0},
		"after 2262":       {Request: "r1", Start: t0, End: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	ctx := context.Background()
	db := mustOpen(t)
	for name, u := range tests {
		if err := db.AppendUsage(ctx, u); err == nil {
			t.Errorf("%s: AppendUsage succeeded", name)
		}
	}
	got, err := db.Usage(ctx, time.Time{}, time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Errorf("refused records were stored: %v", got)
	}
}

func TestCorruptUsage(t *testing.T) {
	ctx := context.Background()
	db := openUnchecked(t)
	u := use("r1", 0, 1)
	if err := db.AppendUsage(ctx, u); err != nil {
		t.Fatal(err)
	}
	key, _, _, _ := usageKeys(u)
	rawPut(t, db, bucketUsage, key, []byte(`{"request":"r9","start":"2025-03-01T09:00:00Z","end":"2025-03-01T10:00:00Z"}`))

	_, err := db.Usage(ctx, t0, t0.Add(time.Hour))
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Usage: %v, want ErrCorrupt", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "bucket usage at key 2025-03-01T10:00:00Z/r1") {
		t.Errorf("message %q does not name the bucket and key", msg)
	}
}
