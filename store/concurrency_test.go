package store

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/gpubot/gpubot/records"
)

// TestConcurrentWriters appends audit entries and allocates request IDs
// from many goroutines: no ID or sequence number may repeat, and both
// must run without gaps. mustCheck then confirms the audit log on disk.
func TestConcurrentWriters(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t)
	const workers, each = 16, 20

	var mu sync.Mutex
	seqs, ids := map[uint64]bool{}, map[string]bool{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				seq, err := db.AppendAudit(ctx, records.AuditEntry{
					At: t0, Actor: fmt.Sprintf("worker-%d", w), Action: "request", Detail: fmt.Sprint(i),
				})
				if err != nil {
					t.Error(err)
					return
				}
				id, err := db.NextRequestID(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seqs[seq] || ids[id] {
					t.Errorf("duplicate: seq %d (%v), id %s (%v)", seq, seqs[seq], id, ids[id])
				}
				seqs[seq], ids[id] = true, true
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	for n := 1; n <= workers*each; n++ {
		if !seqs[uint64(n)] {
			t.Errorf("audit sequence %d was never returned", n)
		}
		if !ids[fmt.Sprintf("r%d", n)] {
			t.Errorf("request ID r%d was never returned", n)
		}
	}
	got, err := db.Audit(ctx, AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != workers*each {
		t.Errorf("audit log has %d entries, want %d", len(got), workers*each)
	}
}
