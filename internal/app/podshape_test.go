package app

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

const shapeConfig = `priorities: [{name: normal, value: 200}]
flavors: [{name: h100, gpusPerNode: 8, nodes: {racksPerBlock: 1, nodesPerRack: 8}}]
people: [{name: alice, slackID: U0ALICE}]
teams: [{name: nlp, members: [alice], quota: {h100: {nominal: 64}}}]
`

// TestOnePodShapeRule: a size is accepted as a configuration seed exactly
// when chat accepts it as a request, and both follow allocator.PodShape
// (10 GPUs on 8-GPU nodes are 2 pods of 5; 9 are refused everywhere).
func TestOnePodShapeRule(t *testing.T) {
	ctx := context.Background()
	cfg, err := config.Parse("gpubot.yaml", []byte(shapeConfig))
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(filepath.Join(t.TempDir(), "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	clk := clocktesting.NewFakeClock(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))
	sim, _, err := simcluster.New(ctx, cfg.Cluster(), db, clk)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := commands.NewService(ctx, cfg.Settings(), commands.Deps{Cluster: sim, Requests: db, IDs: db, Audit: db, Usage: db, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	for g := 1; g <= 40; g++ {
		_, _, shapeErr := allocator.PodShape(g, 8)
		_, seedErr := config.Parse("gpubot.yaml", []byte(shapeConfig+fmt.Sprintf(
			"simulation: {running: [{requester: alice, team: nlp, gpus: %d, flavor: h100, duration: 1h}]}\n", g)))
		seedOK := seedErr == nil || !strings.Contains(seedErr.Error(), "cannot be split")
		outs := svc.Handle(ctx, commands.Input{User: "U0ALICE", Text: fmt.Sprintf("whatif %dxh100 for 1h", g)})
		chatOK := !strings.Contains(fmt.Sprint(outs), "cannot be split")
		if seedOK != (shapeErr == nil) || chatOK != (shapeErr == nil) {
			t.Errorf("%d GPUs on 8-GPU nodes: PodShape error %v, seed accepted %v (%v), chat accepted %v", g, shapeErr, seedOK, seedErr, chatOK)
		}
	}
}
