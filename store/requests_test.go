package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpubot/gpubot/records"
)

func TestRequestRoundTrip(t *testing.T) {
	tests := map[string]records.Request{
		"every field": request("r1"),
		"bare":        {ID: "r2"},
		"finished": request("r3", func(r *records.Request) {
			r.State, r.EndedAt, r.EndReason = records.StateFinished, t0.Add(7*time.Hour), "completed"
			r.Estimate, r.Nodes = nil, nil
		}),
		"other time zone": request("r4", func(r *records.Request) {
			r.CreatedAt = time.Date(2025, 3, 1, 10, 0, 0, 123456789, time.FixedZone("CET", 3600))
		}),
	}
	ctx := context.Background()
	db := mustOpen(t)
	for name, want := range tests {
		t.Run(name, func(t *testing.T) {
			if err := db.PutRequest(ctx, want); err != nil {
				t.Fatal(err)
			}
			got, err := db.GetRequest(ctx, want.ID)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("GetRequest(%s) (-want +got):\n%s", want.ID, diff)
			}
		})
	}
}

func TestPutRequestReplaces(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	if err := db.PutRequest(ctx, request("r1")); err != nil {
		t.Fatal(err)
	}
	want := request("r1", func(r *records.Request) { r.State = records.StateCancelled })
	if err := db.PutRequest(ctx, want); err != nil {
		t.Fatal(err)
	}
	all, err := db.ListRequests(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]records.Request{want}, all); diff != "" {
		t.Errorf("after two puts (-want +got):\n%s", diff)
	}
}

func TestPutRequestNeedsID(t *testing.T) {
	db := mustOpen(t)
	if err := db.PutRequest(context.Background(), request("")); err == nil {
		t.Error("PutRequest without ID succeeded")
	}
}

func TestGetRequestNotFound(t *testing.T) {
	db := mustOpen(t)
	_, err := db.GetRequest(context.Background(), "r42")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetRequest(r42): %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), "r42") {
		t.Errorf("message %q does not name the request", err)
	}
}

func TestListRequests(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	ids := []string{"r10", "r2", "seed-12", "r1", "r100", "seed-3", "r9", "adhoc"}
	for _, id := range ids {
		team := "vision"
		if strings.HasPrefix(id, "seed") {
			team = "nlp"
		}
		if err := db.PutRequest(ctx, request(id, func(r *records.Request) { r.Team = team })); err != nil {
			t.Fatal(err)
		}
	}

	tests := map[string]struct {
		keep func(records.Request) bool
		want []string
	}{
		"all":       {nil, []string{"adhoc", "r1", "r2", "r9", "r10", "r100", "seed-3", "seed-12"}},
		"team nlp":  {func(r records.Request) bool { return r.Team == "nlp" }, []string{"seed-3", "seed-12"}},
		"none kept": {func(records.Request) bool { return false }, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := db.ListRequests(ctx, tc.keep)
			if err != nil {
				t.Fatal(err)
			}
			var gotIDs []string
			for _, r := range got {
				gotIDs = append(gotIDs, r.ID)
			}
			if diff := cmp.Diff(tc.want, gotIDs); diff != "" {
				t.Errorf("IDs (-want +got):\n%s", diff)
			}
		})
	}
}

func TestListRequestsKeepMayCallStore(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	if err := db.PutRequest(ctx, request("r1")); err != nil {
		t.Fatal(err)
	}
	_, err := db.ListRequests(ctx, func(r records.Request) bool {
		_, err := db.AppendAudit(ctx, records.AuditEntry{At: t0, Actor: "gpubot", Action: "list", Target: r.ID})
		return err == nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCompareIDs(t *testing.T) {
	want := []string{"", "a", "r", "r0", "r01", "r1", "r2", "r10", "r18446744073709551616", "s1", "seed-2", "seed-10"}
	got := slices.Clone(want)
	slices.Reverse(got)
	slices.SortFunc(got, compareIDs)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

func TestNextRequestID(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	next := func() string {
		t.Helper()
		id, err := db.NextRequestID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	got := []string{next(), next()}
	// An ID stored by other means moves the counter past it.
	if err := db.PutRequest(ctx, request("r7")); err != nil {
		t.Fatal(err)
	}
	// Other shapes do not.
	if err := db.SaveRequests(ctx, request("seed-99"), request("r007"), request("rx")); err != nil {
		t.Fatal(err)
	}
	got = append(got, next())
	// Storing a lower ID does not move it back.
	if err := db.PutRequest(ctx, request("r3")); err != nil {
		t.Fatal(err)
	}
	got = append(got, next())
	if diff := cmp.Diff([]string{"r1", "r2", "r8", "r9"}, got); diff != "" {
		t.Errorf("IDs (-want +got):\n%s", diff)
	}
}

func TestNextRequestIDAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/gpubot.db"
	var got []string
	for i := range 4 {
		db := mustOpenPath(t, path)
		for range 2 {
			id, err := db.NextRequestID(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, id)
		}
		switch i {
		case 0:
			// Any write keeps what was handed out, the request stored
			// or not.
			if _, err := db.AppendAudit(ctx, records.AuditEntry{Actor: "a", Action: "request", Outcome: "ok"}); err != nil {
				t.Fatal(err)
			}
		case 1:
			if _, err := db.Commit(ctx, records.Writes{Requests: []records.Request{request(got[len(got)-2])}}, time.Time{}); err != nil {
				t.Fatal(err)
			}
		case 2:
			// Nothing written: the file names neither, so they may
			// come again.
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"r1", "r2", "r3", "r4", "r5", "r6", "r5", "r6"}, got); diff != "" {
		t.Errorf("IDs (-want +got):\n%s", diff)
	}
}

func TestReserveRequestIDIsDurable(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/gpubot.db"
	var got []string
	for range 3 {
		db := mustOpenPath(t, path)
		id, err := db.ReserveRequestID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, id)
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"r1", "r2", "r3"}, got); diff != "" {
		t.Errorf("IDs (-want +got):\n%s", diff)
	}
}

func TestNextRequestIDConcurrent(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	ids := make(chan string, 200)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				id, err := db.NextRequestID(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if err := db.PutRequest(ctx, request(id)); err != nil {
					t.Error(err)
				}
				ids <- id
			}
		})
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		if seen[id] {
			t.Errorf("%s handed out twice", id)
		}
		seen[id] = true
	}
	if len(seen) != 200 {
		t.Errorf("%d distinct IDs, want 200", len(seen))
	}
}

func TestSaveRequestsAllOrNone(t *testing.T) {
	tests := map[string][]records.Request{
		"missing ID":     {request("r1"), request("")},
		"key too large":  {request("r1"), request(strings.Repeat("r", 40000))},
		"fails on first": {request(strings.Repeat("r", 40000)), request("r1")},
	}
	ctx := context.Background()
	for name, rs := range tests {
		t.Run(name, func(t *testing.T) {
			db := mustOpen(t)
			if err := db.SaveRequests(ctx, rs...); err == nil {
				t.Fatal("SaveRequests succeeded")
			}
			all, err := db.ListRequests(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != 0 {
				t.Errorf("a failed SaveRequests stored %d requests", len(all))
			}
		})
	}

	t.Run("success", func(t *testing.T) {
		db := mustOpen(t)
		want := []records.Request{request("r1"), request("r2", func(r *records.Request) { r.Nodes = []string{} })}
		if err := db.SaveRequests(ctx, want...); err != nil {
			t.Fatal(err)
		}
		got, err := db.ListRequests(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		// omitempty turns an empty slice into nil.
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

func TestCorruptRequest(t *testing.T) {
	tests := map[string]struct {
		value string
		want  string
	}{
		"not JSON":      {`{"id":"r1",`, "unexpected end of JSON input"},
		"wrong type":    {`{"id":"r1","gpus":"eight"}`, "cannot unmarshal"},
		"ID is not key": {`{"id":"r2"}`, `record has ID "r2"`},
	}
	ctx := context.Background()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			db := openUnchecked(t)
			if err := db.PutRequest(ctx, request("r0")); err != nil {
				t.Fatal(err)
			}
			rawPut(t, db, bucketRequests, []byte("r1"), []byte(tc.value))

			_, getErr := db.GetRequest(ctx, "r1")
			_, listErr := db.ListRequests(ctx, nil)
			for op, err := range map[string]error{"GetRequest": getErr, "ListRequests": listErr} {
				if !errors.Is(err, ErrCorrupt) {
					t.Errorf("%s: %v, want ErrCorrupt", op, err)
					continue
				}
				for _, w := range []string{"requests", `"r1"`, tc.want} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: message %q does not contain %q", op, err, w)
					}
				}
			}
			// The healthy record is still readable.
			if _, err := db.GetRequest(ctx, "r0"); err != nil {
				t.Error(err)
			}
		})
	}
}
