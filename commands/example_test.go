package commands_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

func ExampleService_Handle() {
	ctx := context.Background()
	cfg, err := config.Parse("example.yaml", []byte(`
priorities: [{name: normal, value: 1}]
approval: {aboveGPUs: 8}
flavors: [{name: h100, gpusPerNode: 8, nodes: {nodesPerRack: 2}}]
people: [{name: alice}, {name: bob}]
teams: [{name: nlp, channel: "#nlp", leads: [bob], members: [alice], quota: {h100: {nominal: 16}}}]
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	dir, err := os.MkdirTemp("", "gpubot-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	db, err := store.Open(filepath.Join(dir, "gpubot.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	clock := clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC))
	sim, _, err := simcluster.New(ctx, cfg.Cluster(), db, clock)
	if err != nil {
		fmt.Println(err)
		return
	}
	svc, err := commands.NewService(ctx, cfg.Settings(), commands.Deps{
		Cluster: sim, Requests: db, IDs: db, Audit: db, Usage: db, Clock: clock,
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	say := func(in commands.Input) {
		for _, o := range svc.Handle(ctx, in) {
			fmt.Printf("%-8s %-6s %s\n", o.To.Kind, o.To.Request+o.To.Person, o.Reply.Text)
		}
	}
	say(commands.Input{User: "alice", Text: "/gpu request 8xh100 for 2h"})
	say(commands.Input{User: "alice", Text: "/gpu request 16xh100 for 1h"})
	say(commands.Input{User: "bob", Action: &commands.Action{Name: commands.VerbApprove, Request: "r2"}})
	// Output:
	// channel  r1     r1 running on h100-b1-r1-n1
	// sender          r1 running on h100-b1-r1-n1. Updates follow in its thread in #nlp.
	// channel  r2     r2 needs approval
	// person   bob    alice's request r2 (16× h100 for 1h, team nlp, priority normal) needs your approval: more than 8 GPUs. Its card is in #nlp.
	// sender          r2 needs approval (more than 8 GPUs); bob (lead of nlp) can approve it. I posted it in #nlp and will tell you when it is decided.
	// thread   r2     Approved by bob.
	// person   alice  bob approved your request r2 (16× h100 for 1h, team nlp, priority normal).
	// card     r2     r2 queued: starts in 1h–2h (10:00–11:00), next in line
	// sender          Approved r2.
}
