package app

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/gpubot/gpubot/bot"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/gpumetrics"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/k8sbridge"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

// Zombie sweeps: the service options that turn them on, the simulated
// use of the seeds' GPUs, and the clock that runs the sweep.

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

// sweepClock says when the zombie sweep is due: at every multiple of an
// interval taken from zombies.schedule, aligned to the clock ("*/10 * * * *"
// runs at :00, :10, …): "*/N * * * *" is every N minutes (N dividing 60),
// "* * * * *" every minute, "@every D" every D, "@hourly" every hour;
// other specs run every 10 minutes, with a warning in the log.
//
// It stands in for the scheduler of scheduled jobs (package digest), which
// owns cron specs; once that is wired, the sweep is one of its jobs
// (commands.Service.Sweep is a plain body of now) and this goes.
type sweepClock struct {
	every time.Duration
	last  time.Time // the due time last run
}

func newSweepClock(spec string, log *slog.Logger) *sweepClock {
	every, ok := interval(spec)
	if !ok {
		every = 10 * time.Minute
		log.Warn("zombies.schedule is not an interval this build can run yet; sweeping every 10 minutes", "schedule", spec)
	}
	return &sweepClock{every: every}
}

// interval reads the spec as a fixed interval, if it is one.
func interval(spec string) (time.Duration, bool) {
	s := strings.TrimSpace(spec)
	if s == "@hourly" {
		return time.Hour, true
	}
	if rest, ok := strings.CutPrefix(s, "@every "); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		return d, err == nil && d > 0
	}
	f := strings.Fields(s)
	if len(f) != 5 || f[1] != "*" || f[2] != "*" || f[3] != "*" || f[4] != "*" {
		return 0, false
	}
	if f[0] == "*" {
		return time.Minute, true
	}
	n, err := strconv.Atoi(strings.TrimPrefix(f[0], "*/"))
	if !strings.HasPrefix(f[0], "*/") || err != nil || n < 1 || 60%n != 0 {
		return 0, false
	}
	return time.Duration(n) * time.Minute, true
}

// next is the first due time after now.
func (c *sweepClock) next(now time.Time) time.Time {
	return now.Truncate(c.every).Add(c.every)
}

// due reports whether a due time has come since the last run (none before
// the first call: the first sweep is at the first due time after start),
// and marks it run.
func (c *sweepClock) due(now time.Time) bool {
	at := now.Truncate(c.every)
	if c.last.IsZero() {
		c.last = at
		return false
	}
	if !at.After(c.last) {
		return false
	}
	c.last = at
	return true
}

// sweepZombies runs the zombie sweep on clk's time at each due time until
// ctx ends (with a real cluster, whose own events drive everything else).
func sweepZombies(ctx context.Context, clk clock.Clock, sc *sweepClock, svc *commands.Service, rt *bot.Runtime) {
	sc.due(clk.Now())
	for {
		t := clk.NewTimer(sc.next(clk.Now()).Sub(clk.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		if now := clk.Now(); sc.due(now) {
			rt.DeliverNow(ctx, svc.Sweep(ctx, now))
		}
	}
}
