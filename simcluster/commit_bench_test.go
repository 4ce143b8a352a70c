package simcluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

// bench10k is 1 000 nodes of 8 GPUs shared by four queues, holding 13 000
// workloads of 1–4 GPUs: about 3 200 admitted and 9 800 pending.
func bench10k() *allocator.Cluster {
	c := &allocator.Cluster{
		Flavors: []allocator.Flavor{{Name: "h100", GPUsPerNode: 8}},
		Policy:  allocator.Policy{Mode: allocator.BestEffortFIFO, HalfLife: 24 * time.Hour},
	}
	for i := range 1000 {
		c.Nodes = append(c.Nodes, allocator.Node{Name: fmt.Sprintf("n%04d", i), Flavor: "h100", GPUs: 8,
			Block: fmt.Sprintf("b%d", i/128), Rack: fmt.Sprintf("r%d", i/16)})
	}
	for q := range 4 {
		c.Queues = append(c.Queues, allocator.Queue{Name: fmt.Sprintf("team%d", q), Flavors: []string{"h100"},
			Quotas: map[string]allocator.Quota{"h100": {Nominal: 2000}}})
	}
	return c
}

// seed10k stores the 13 000 workloads, all pending, as the single blob
// an older gpubot saved (the format both before and after this change
// read), for New to load and migrate.
func seed10k(b *testing.B, db *store.DB) {
	rng := rand.New(rand.NewPCG(12, 13))
	ws := make([]allocator.Workload, 13000)
	for i := range ws {
		ws[i] = allocator.Workload{ID: fmt.Sprintf("w%05d", i), Queue: fmt.Sprintf("team%d", rng.IntN(4)),
			GPUs: 1 + rng.IntN(4), Priority: int32(rng.IntN(3)), Created: t0.Add(time.Duration(i) * time.Second),
			Duration: time.Duration(4+rng.IntN(20)) * time.Hour}
	}
	data, err := json.Marshal(map[string]any{"version": 1, "now": t0.Add(4 * time.Hour), "workloads": ws, "usage": map[string]float64{}})
	if err != nil {
		b.Fatal(err)
	}
	if err := db.PutState(context.Background(), simcluster.StateName, data); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCommit10kPending is one decision's commit on a simulated
// cluster of 13 000 workloads (9 800 pending) saved by its owner, as the
// command service commits it: a request arrives (or is cancelled) a
// second after the last, and what Unsaved returns is committed to bbolt
// ("commit") or only computed ("delta", without the disk). The decision
// itself (Apply) is not timed.
func BenchmarkCommit10kPending(b *testing.B) {
	for _, write := range []bool{false, true} {
		name := "delta"
		if write {
			name = "commit"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			db, err := store.Open(filepath.Join(b.TempDir(), "gpubot.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			seed10k(b, db)
			clk := clocktesting.NewFakeClock(t0.Add(4 * time.Hour))
			sim, _, err := simcluster.New(ctx, bench10k(), db, clk, simcluster.WithSavesByCaller())
			if err != nil {
				b.Fatal(err)
			}
			save := func(durable bool) int {
				states, changed, err := sim.Unsaved()
				if err != nil {
					b.Fatal(err)
				}
				if !changed {
					return 0
				}
				if durable {
					if _, err := db.Commit(ctx, records.Writes{States: states}, clk.Now()); err != nil {
						b.Fatal(err)
					}
				}
				sim.Saved()
				return len(states)
			}
			extra := allocator.Workload{ID: "zz-bench", Queue: "team0", GPUs: 8, Priority: -1, Created: clk.Now(), Duration: time.Hour}
			clk.Step(time.Second)
			if _, err := sim.Apply(ctx, commands.Op{Kind: commands.OpSubmit, Workload: extra}); err != nil { // admits what fits
				b.Fatal(err)
			}
			save(true) // with the migration, in both cases
			snap, _ := sim.Snapshot(ctx)
			pending := 0
			for _, w := range snap.Workloads() {
				if w.Admission == nil {
					pending++
				}
			}
			if pending < 9000 {
				b.Fatalf("%d pending, want about 10 000", pending)
			}
			written := 0
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				clk.Step(time.Second)
				op := commands.Op{Kind: commands.OpSubmit, Workload: extra}
				if i%2 == 0 {
					op = commands.Op{Kind: commands.OpRemove, ID: extra.ID}
				}
				if _, err := sim.Apply(ctx, op); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				written += save(write)
			}
			b.ReportMetric(float64(written)/float64(b.N), "states/op")
			b.ReportMetric(float64(pending), "pending")
		})
	}
}
