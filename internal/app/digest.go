package app

import (
	"fmt"
	"log/slog"

	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/digest"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/store"
)

// newDigests builds the digest engine over the store and cluster, and the
// scheduler of every scheduled job: the sampler, the configured digests
// and the weekly report. The caller drives the scheduler: the console and
// the simulated cluster's driver at Next, a real cluster with RunCron.
func newDigests(cfg *config.Config, db *store.DB, cluster digest.Cluster, log *slog.Logger) (*digest.Engine, *digest.Scheduler, error) {
	eng, err := digest.New(cfg.Settings(), digest.Sources{
		Cluster: cluster, Requests: db, Usage: db, Audit: db, Samples: db, Zombies: db,
	}, digest.WithEngineLogger(log))
	if err != nil {
		return nil, nil, err
	}
	sched := digest.NewScheduler(db, digest.WithLogger(log), digest.WithCommitter(db))
	if err := eng.Register(sched, cfg.Digests(), cfg.Report()); err != nil {
		return nil, nil, fmt.Errorf("scheduling digests: %w", err)
	}
	return eng, sched, nil
}

// addSweep schedules svc's zombie sweep on zombies.schedule. It goes after
// the service is built (the digests are built before, for WithDigests)
// and before the scheduler first runs.
func addSweep(sched *digest.Scheduler, cfg *config.Config, svc *commands.Service) error {
	if err := sched.Add("zombie sweep", cfg.Zombies().Schedule, digest.Outputs(svc.Sweep)); err != nil {
		return fmt.Errorf("scheduling the zombie sweep: %w", err)
	}
	return nil
}
