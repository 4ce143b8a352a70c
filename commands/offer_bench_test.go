package commands_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

// BenchmarkOffer is /gpu status of a queued request on the bundled
// example (its seeded work running, 40 H100s waiting for quota): "offer"
// with the example's spot and DWS flavors, whose card then works out both
// options (a scheduling cycle and an estimate on the spot pool, the
// provisioning history, the week's spend); "none" the same service
// without elastic terms, so the card has no offer.
func BenchmarkOffer(b *testing.B) {
	for _, name := range []string{"offer", "none"} {
		b.Run(name, func(b *testing.B) {
			cfg := exampleConfig(b)
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
			set := cfg.Settings()
			if name == "none" {
				set.Elastic = commands.ElasticSettings{}
			}
			svc, err := commands.NewService(ctx, set, commands.Deps{Cluster: sim, Requests: db, IDs: db, Audit: db, Usage: db, Clock: clk})
			if err != nil {
				b.Fatal(err)
			}
			if _, err := svc.Seed(ctx, cfg.Seeds()); err != nil {
				b.Fatal(err)
			}
			svc.Handle(ctx, commands.Input{User: "bob", Text: "request 40xh100 for 8h"})
			in := commands.Input{User: "bob", Text: "status r10"}
			for b.Loop() {
				outs := svc.Handle(ctx, in)
				if got := strings.Contains(text(outs[0].Reply), "Sooner on elastic capacity"); got != (name == "offer") {
					b.Fatalf("offer shown: %v", got)
				}
			}
		})
	}
}
