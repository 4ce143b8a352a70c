package commands_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

// BenchmarkSweep is one zombie sweep over 500 running 8-GPU requests on a
// 4 000-GPU simulated cluster (a real bbolt file), a fifth of them idle:
// "first" finds the 100 zombies and prompts their owners (about 200
// messages); "steady" is a sweep with nothing new to say, as most sweeps
// are (100 open zombies, none due a step).
func BenchmarkSweep(b *testing.B) {
	const n = 500
	yaml := `timezone: UTC
priorities: [{name: normal, value: 200}]
flavors: [{name: h100, gpusPerNode: 8, nodes: {blocks: 5, racksPerBlock: 10, nodesPerRack: 10}}]
people: [{name: alice}, {name: bob}]
teams: [{name: nlp, leads: [bob], members: [alice], quota: {h100: {nominal: 4000}}}]
`
	setup := func(b *testing.B) (*commands.Service, *store.DB) {
		b.Helper()
		cfg := parse(b, yaml)
		ctx := context.Background()
		db, err := store.Open(filepath.Join(b.TempDir(), "gpubot.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		clk := clocktesting.NewFakeClock(t0)
		sim, _, err := simcluster.New(ctx, cfg.Cluster(), db, clk)
		if err != nil {
			b.Fatal(err)
		}
		svc, err := commands.NewService(ctx, cfg.Settings(), commands.Deps{Cluster: sim, Requests: db, IDs: db, Audit: db, Usage: db, Commit: db, Clock: clk},
			commands.WithZombies(db), commands.WithUtilization(sim))
		if err != nil {
			b.Fatal(err)
		}
		for i := range n {
			svc.Handle(ctx, commands.Input{User: "alice", Text: "request 8xh100 for 2d"})
			if i%5 == 0 {
				if err := sim.SetProfile(ctx, fmt.Sprintf("r%d", i+1), simcluster.Profile{GPUUtilization: ptr.To(1.0)}); err != nil {
					b.Fatal(err)
				}
			}
		}
		clk.SetTime(t0.Add(40 * time.Minute))
		return svc, db
	}
	at := t0.Add(40 * time.Minute)
	b.Run("first", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			svc, _ := setup(b)
			b.StartTimer()
			if outs := svc.Sweep(context.Background(), at); len(outs) != 2*n/5 {
				b.Fatalf("%d outputs, want %d", len(outs), 2*n/5)
			}
		}
	})
	b.Run("steady", func(b *testing.B) {
		svc, _ := setup(b)
		svc.Sweep(context.Background(), at)
		for b.Loop() {
			if outs := svc.Sweep(context.Background(), at.Add(time.Minute)); len(outs) != 0 {
				b.Fatalf("%d outputs", len(outs))
			}
		}
	})
}
