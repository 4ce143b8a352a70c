package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/gpumetrics"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/k8sbridge"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

// Zombie sweeps: the service options that turn them on and the simulated
// use of the seeds' GPUs. The sweep itself is a scheduled job (addSweep).

// simZombieOptions turn the sweep on for the simulated cluster, which is
// also the source of GPU utilization.
func simZombieOptions(cfg *config.Config, db *store.DB, sim *simcluster.Cluster, log *slog.Logger) []commands.Option {
	if url := cfg.Metrics().PrometheusURL; url != "" {
		log.Info("metrics.prometheusURL is not used with the simulated cluster: its GPU utilization is simulated", "prometheusURL", url)
	}
	return []commands.Option{commands.WithZombies(db), commands.WithUtilization(sim)}
}

// clusterZombieOptions turn the sweep on for a real cluster: GPU
// utilization from Prometheus when metrics.prometheusURL is set, other
// people's workloads with zombies.scope: all.
func clusterZombieOptions(cfg *config.Config, db *store.DB, br *k8sbridge.Bridge, log *slog.Logger) ([]commands.Option, error) {
	opts := []commands.Option{commands.WithZombies(db)}
	m := cfg.Metrics()
	if m.PrometheusURL != "" {
		src, err := gpumetrics.New(m.PrometheusURL, br, gpumetrics.WithLabels(m.PodLabel, m.NamespaceLabel), gpumetrics.WithLogger(log))
		if err != nil {
			return nil, err
		}
		opts = append(opts, commands.WithUtilization(src))
	} else {
		log.Info("no metrics.prometheusURL: the zombie sweep finds pods not ready and work past its end, not idle GPUs")
	}
	if cfg.Zombies().Policy.All {
		opts = append(opts, commands.WithOthers(br))
	}
	return opts, nil
}

// seedUses gives the seeded workloads (ids, in the order of the
// configuration's seeds) their simulated use of the GPUs.
func seedUses(ctx context.Context, cfg *config.Config, sim *simcluster.Cluster, ids []string) error {
	uses := cfg.SeedUses()
	for i, id := range ids {
		if i >= len(uses) || (uses[i] == config.SeedUse{}) {
			continue
		}
		p := simcluster.Profile{GPUUtilization: uses[i].GPUUtilization, PodsNeverReady: uses[i].PodsNeverReady}
		if err := sim.SetProfile(ctx, id, p); err != nil {
			return fmt.Errorf("simulating how seed %s uses its GPUs: %w", id, err)
		}
	}
	return nil
}
