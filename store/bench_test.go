package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/gpubot/gpubot/records"
)

// Each write is one bbolt transaction with its fsync, so these measure
// the disk under t.TempDir as much as the store.

func BenchmarkPutRequest(b *testing.B) {
	ctx := context.Background()
	db := mustOpen(b)
	for i := 0; b.Loop(); i++ {
		if err := db.PutRequest(ctx, request(fmt.Sprintf("r%d", i%1000+1))); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendAudit(b *testing.B) {
	ctx := context.Background()
	db := mustOpen(b)
	e := records.AuditEntry{At: t0, Actor: "ana", Action: "request", Target: "r1", Outcome: "ok", Detail: "8xh100 6h"}
	for b.Loop() {
		if _, err := db.AppendAudit(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkListRequests1000(b *testing.B) {
	ctx := context.Background()
	db := mustOpen(b)
	rs := make([]records.Request, 1000)
	for i := range rs {
		rs[i] = request(fmt.Sprintf("r%d", i+1))
	}
	if err := db.SaveRequests(ctx, rs...); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := db.ListRequests(ctx, nil); err != nil {
			b.Fatal(err)
		}
	}
}
