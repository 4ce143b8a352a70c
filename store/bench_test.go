package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

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

// BenchmarkCheck measures what Open adds to a start: Check of a store
// with n requests and 10·n audit entries (and their usage records),
// written in bulk beforehand.
func BenchmarkCheck(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("requests=%d,audit=%d", n, 10*n), func(b *testing.B) {
			db := mustOpen(b)
			err := db.bolt.Update(func(tx *bolt.Tx) error {
				reqs, audit := tx.Bucket(bucketRequests), tx.Bucket(bucketAudit)
				for i := 1; i <= n; i++ {
					if err := putRequest(reqs, request(fmt.Sprintf("r%d", i))); err != nil {
						return err
					}
					for range 10 {
						seq, _ := audit.NextSequence()
						v, _ := json.Marshal(records.AuditEntry{Seq: seq, At: t0, Actor: "ana", Action: "request", Target: fmt.Sprintf("r%d", i), Outcome: "ok", Detail: "8xh100 6h"})
						if err := audit.Put(auditKey(seq), v); err != nil {
							return err
						}
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			path := db.Path()
			if err := db.Close(); err != nil {
				b.Fatal(err)
			}
			fi, _ := os.Stat(path)
			for b.Loop() {
				if _, err := Check(path); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(fi.Size())/(1<<20), "MiB")
		})
	}
}

// BenchmarkReceive is the inbox write per delivery, one transaction
// each (op = one delivery).
func BenchmarkReceive(b *testing.B) {
	ctx := context.Background()
	db := mustOpen(b)
	data := []byte(`{"Order":"U0ALICE","Input":{"User":"U0ALICE","Text":"status"}}`)
	for i := 0; b.Loop(); i++ {
		if _, err := db.Receive(ctx, fmt.Sprintf("slack:env:%08x-%d", i*2654435761, i), data, t0, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReceiveAll16 is the inbox write per delivery when 16 arrive
// during a write (group commit: op = one delivery).
func BenchmarkReceiveAll16(b *testing.B) {
	ctx := context.Background()
	db := mustOpen(b)
	data := []byte(`{"Order":"U0ALICE","Input":{"User":"U0ALICE","Text":"status"}}`)
	ds := make([]records.Inbound, 16)
	n := 0
	for b.Loop() {
		if n%16 == 0 {
			for j := range ds {
				ds[j] = records.Inbound{Key: fmt.Sprintf("slack:env:%08x-%d", (n+j)*2654435761, n+j), Data: data}
			}
			if _, err := db.ReceiveAll(ctx, ds, t0, time.Hour); err != nil {
				b.Fatal(err)
			}
		}
		n++
	}
}
