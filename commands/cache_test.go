package commands

import (
	"context"
	"sync"
	"testing"

	"github.com/gpubot/gpubot/records"
)

// listOnly is a RequestStore that only lists (the cache's load).
type listOnly []records.Request

func (l listOnly) GetRequest(context.Context, string) (records.Request, error) {
	return records.Request{}, nil
}
func (l listOnly) PutRequest(context.Context, records.Request) error { return nil }
func (l listOnly) ListRequests(context.Context, func(records.Request) bool) ([]records.Request, error) {
	return append([]records.Request(nil), l...), nil
}

// TestCacheRefsStayAsCommitted checks what refs promises: a pointer it
// handed out is the request as it was when refs ran, whatever is
// committed after, and reading it races with no commit (under -race, a
// put that changed an entry in place fails here).
func TestCacheRefsStayAsCommitted(t *testing.T) {
	var rc requestCache
	loaded := listOnly{
		{ID: "r1", Requester: "alice", State: records.StateQueued, GPUs: 8, Estimate: &records.Estimate{Position: 3}},
		{ID: "r2", Requester: "bob", State: records.StateRunning, GPUs: 4},
	}
	if err := rc.load(context.Background(), loaded); err != nil {
		t.Fatal(err)
	}
	queued := func(r *records.Request) bool { return r.State == records.StateQueued }
	before := rc.refs(queued)
	if len(before) != 1 || before[0].ID != "r1" {
		t.Fatalf("refs(queued) = %v, want r1 alone", before)
	}

	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 200 {
			rc.put([]records.Request{{ID: "r1", Requester: "alice", State: records.StateRunning, GPUs: 8 + i, Estimate: &records.Estimate{Position: i}}})
		}
	})
	for range 200 {
		if r := before[0]; r.State != records.StateQueued || r.GPUs != 8 || r.Estimate.Position != 3 {
			t.Fatalf("the pointer refs gave changed: %+v", *r)
		}
	}
	wg.Wait()

	if got := rc.refs(queued); len(got) != 0 {
		t.Errorf("refs(queued) after r1 started = %d requests, want none", len(got))
	}
	if got := rc.refs(nil); len(got) != 2 {
		t.Errorf("refs(nil) = %d requests, want 2", len(got))
	}
	now, _ := rc.get("r1")
	if now.State != records.StateRunning || now.GPUs != 207 {
		t.Errorf("r1 as last committed: %s with %d GPUs, want running with 207", now.State, now.GPUs)
	}
}
