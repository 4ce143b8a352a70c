package digest_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/store"
)

// BenchmarkDailyDigest builds the cluster digest over a busy store: 8
// days of 100 requests a day (each waited, ran and left usage and an audit
// entry), a sample every 10 minutes, and 40 requests waiting now on a
// full 64-node cluster, so that the capacity what-ifs (two simulations
// per candidate change) run every time.
func BenchmarkDailyDigest(b *testing.B) {
	db, err := store.Open(filepath.Join(b.TempDir(), "gpubot.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := b.Context()
	teams := []string{"nlp", "vision", "speech"}
	start := due.AddDate(0, 0, -8)
	for i := range 8 * 100 {
		created := start.Add(time.Duration(i) * 8 * 24 * time.Hour / 800)
		admitted := created.Add(time.Duration(i%7) * 10 * time.Minute)
		ended := admitted.Add(2 * time.Hour)
		r := records.Request{ID: fmt.Sprintf("r%d", i+1), Requester: "alice", Team: teams[i%3], GPUs: 8, Priority: []string{"low", "normal", "high"}[i%3],
			Duration: 2 * time.Hour, State: records.StateFinished, CreatedAt: created, AdmittedAt: admitted, EndedAt: ended, EndReason: "released by alice",
			FirstEstimate: &records.Estimate{At: created, Earliest: created, Latest: created.Add(time.Hour), Known: true},
			Waits:         []records.Wait{{From: created, To: admitted}}}
		if err := db.PutRequest(ctx, r); err != nil {
			b.Fatal(err)
		}
		if err := db.AppendUsage(ctx, records.UsageRecord{Request: r.ID, Team: r.Team, Requester: r.Requester, GPUs: 8, Start: admitted, End: ended}); err != nil {
			b.Fatal(err)
		}
		if _, err := db.AppendAudit(ctx, records.AuditEntry{At: admitted, Actor: "gpubot", Action: "admitted", Target: r.ID, Outcome: "ok"}); err != nil {
			b.Fatal(err)
		}
	}
	for t := start; t.Before(due); t = t.Add(10 * time.Minute) {
		if err := db.AppendSample(ctx, records.Sample{At: t, Pending: 3, Waiting: map[string]int{"quota": 2, "capacity": 1},
			Flavors: []records.FlavorSample{{Flavor: "h100", GPUs: 512, Free: 8, Fragmented: 4, Largest: 8}}}); err != nil {
			b.Fatal(err)
		}
	}
	cl := cluster(64, map[string][2]int{"nlp": {256, 128}, "vision": {128, 64}, "speech": {128, -1}})
	var ws []allocator.Workload
	for i := range 64 {
		ws = append(ws, allocator.Workload{ID: fmt.Sprintf("run%d", i), Queue: teams[i%3], Priority: prio["normal"], GPUs: 8, Created: due.Add(-time.Hour),
			Duration: time.Duration(1+i%6) * time.Hour, Admission: &allocator.Admission{Flavor: "h100", At: due.Add(-time.Hour), Nodes: []string{fmt.Sprintf("h100-n%d", i+1)}}})
	}
	for i := range 40 {
		ws = append(ws, allocator.Workload{ID: fmt.Sprintf("wait%d", i), Queue: teams[i%3], Priority: prio[[]string{"normal", "high"}[i%2]], GPUs: 8 * (1 + i%2),
			Created: due.Add(-time.Duration(i) * time.Minute), Duration: 3 * time.Hour})
	}
	snap, err := allocator.NewSnapshot(cl, due, ws, nil)
	if err != nil {
		b.Fatal(err)
	}
	eng, err := newEngine(snap, db)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		if _, err := eng.Digest(ctx, "", due.Add(time.Duration(i))); err != nil {
			b.Fatal(err)
		}
	}
}
