// Package app is gpubot's composition root: it reads the configuration,
// opens the store, builds the cluster (simulated by default), the command
// service and the chat adapter, and runs them. Run is usable in-process,
// which is how the end-to-end tests drive the whole bot.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/bot"
	"github.com/gpubot/gpubot/bot/console"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/digest"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/simcluster"
)

// Options are what Run needs. The zero value of each optional field is a
// sensible default.
type Options struct {
	// ConfigPath is the YAML configuration; "" uses the bundled example.
	ConfigPath string
	// DataDir holds gpubot.db (and gpubot.log in console mode). Required.
	DataDir string
	// As is who types first in the console; "" is the first person.
	As string
	// Stdin and Stdout carry the console chat.
	Stdin  io.Reader
	Stdout io.Writer
	// Stderr receives logs when LogFile is "-".
	Stderr io.Writer
	// Interactive shows prompts instead of echoing lines.
	Interactive bool
	// Start is the simulated time of a fresh data directory; zero means
	// the wall clock's time, to the minute. A data directory that exists
	// resumes at its own simulated time, or at Start if that is later: as
	// if gpubot had been stopped until then (what happened meanwhile in
	// the cluster is caught up, missed digests are posted late).
	Start time.Time
	// LogFile: "" is DataDir/gpubot.log, "-" is Stderr.
	LogFile  string
	LogLevel slog.Level
	// LogFormat is "text" (the default, log/slog's key=value) or "json"
	// (one JSON object per line, for log collectors).
	LogFormat string
	// Chat is where people talk to gpubot; ChatAuto (the zero value) is
	// Slack when Slack has tokens, else the console.
	Chat Chat
	// Cluster connects a real Kubernetes cluster; the zero value runs on
	// the simulated cluster (see cluster.go).
	Cluster ClusterOptions
	// Slack runs gpubot on Slack instead of the console (see slack.go).
	Slack SlackOptions
	// Clock is the time on Slack with the simulated cluster; nil is the
	// wall clock. Tests pass a fake clock and step it. (The console has
	// its own simulated time, moved by :advance.)
	Clock clock.Clock
}

// Run runs gpubot until ctx is cancelled: on Slack when o.Slack has
// tokens, else the console chat (until its input ends); on a real
// cluster when o.Cluster says so, else the simulated one.
func Run(ctx context.Context, o Options) (err error) {
	if o.DataDir == "" {
		return errors.New("no data directory given")
	}
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return fmt.Errorf("creating the data directory: %w", err)
	}
	cfg, err := loadConfig(o.ConfigPath)
	if err != nil {
		return err
	}
	log, closeLog, err := logger(o)
	if err != nil {
		return err
	}
	defer closeLog()
	db, err := openStore(o.DataDir)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := db.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("closing the store: %w", cerr)
		}
	}()
	defer serveAdmin(o.DataDir, db, log)()
	if o.Cluster.configured() {
		return runOnCluster(ctx, o, cfg, db, log)
	}
	if err := claimDataDir(ctx, db, o.DataDir, simulated); err != nil {
		return err
	}
	if o.onSlack() {
		return runSlackOnSim(ctx, o, cfg, db, log)
	}
	start := o.Start
	if start.IsZero() {
		start = time.Now().Truncate(time.Minute)
	}
	clock := clocktesting.NewFakeClock(start)
	sim, fresh, err := simcluster.New(ctx, cfg.Cluster(), db, clock, simcluster.WithSavesByCaller(),
		simcluster.WithPodsReadyTimeout(cfg.Kubernetes().PodsReadyTimeout), simElastic(cfg))
	if err != nil {
		return err
	}
	if !fresh {
		clock.SetTime(sim.Now())
		if o.Start.After(sim.Now()) {
			log.Info("resuming the simulated cluster later, as if gpubot had been stopped until then", "was", sim.Now(), "now", o.Start)
			clock.SetTime(o.Start)
		}
	}
	set := cfg.Settings()
	eng, sched, err := newDigests(cfg, db, sim, log)
	if err != nil {
		return err
	}
	svc, err := commands.NewService(ctx, set, commands.Deps{
		Cluster: sim, Requests: db, IDs: db, Audit: db, Usage: db, Clock: clock, Commit: db,
	}, append(simZombieOptions(cfg, db, sim, log), commands.WithLogger(log), commands.WithDigests(eng), commands.WithProvisioning(sim))...)
	if err != nil {
		return err
	}
	if err := addSweep(sched, cfg, svc); err != nil {
		return err
	}
	ids, err := svc.Seed(ctx, cfg.Seeds())
	if err != nil {
		return fmt.Errorf("seeding the simulated cluster from %s: %w", cfg.Name(), err)
	}
	if err := seedUses(ctx, cfg, sim, ids); err != nil {
		return err
	}
	con, err := console.New(o.Stdout, set.People, console.As(o.As), console.Interactive(o.Interactive), console.In(set.Location),
		console.Files(filepath.Join(o.DataDir, "files")), console.Clock(clock.Now),
		console.History(filepath.Join(o.DataDir, consoleHistory)), console.Completion(svc.Vocabulary()))
	if err != nil {
		return err
	}
	rt := bot.New(svc, con, bot.WithDeduper(db, 24*time.Hour, clock), bot.WithLogger(log), bot.WithOutbox(db, true, clock))
	be := &backend{rt: rt, sim: sim, svc: svc, sched: sched, clock: clock}
	log.Info("gpubot console starting", "config", cfg.Name(), "dataDir", o.DataDir, "simulatedTime", clock.Now(), "fresh", fresh)
	// Send what was not delivered before the last stop, then catch up:
	// reconcile the store with the cluster, refresh estimates.
	if err := rt.Replay(ctx); err != nil {
		return err
	}
	if err := be.sync(ctx); err != nil {
		return err
	}
	if err := con.Run(ctx, o.Stdin, be); err != nil {
		return fmt.Errorf("reading the console: %w", err)
	}
	log.Info("gpubot console stopped", "simulatedTime", clock.Now())
	return nil
}

// onSlack reports whether Run serves Slack rather than the console.
func (o Options) onSlack() bool {
	return o.Chat == ChatSlack || (o.Chat == ChatAuto && o.Slack.configured())
}

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Default()
	}
	return config.Load(path)
}

// logger opens the operator's log.
func logger(o Options) (*slog.Logger, func(), error) {
	var w io.Writer
	closer := func() {}
	switch o.LogFile {
	case "-":
		w = o.Stderr
		if w == nil {
			w = os.Stderr
		}
	default:
		path := o.LogFile
		if path == "" {
			path = filepath.Join(o.DataDir, "gpubot.log")
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("opening the log file: %w", err)
		}
		w, closer = f, func() { f.Close() }
	}
	ho := &slog.HandlerOptions{Level: o.LogLevel}
	switch o.LogFormat {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, ho)), closer, nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, ho)), closer, nil
	}
	closer()
	return nil, nil, fmt.Errorf("log format %q: want text or json", o.LogFormat)
}

// backend connects the console to the runtime, the simulated cluster and
// the simulated clock.
type backend struct {
	rt    *bot.Runtime
	sim   *simcluster.Cluster
	svc   *commands.Service
	sched *digest.Scheduler
	clock *clocktesting.FakeClock
}

// Process handles one line, then lets the estimates settle, so that
// their posts come after its replies, as in a transcript.
func (b *backend) Process(ctx context.Context, in commands.Input) {
	b.rt.Process(ctx, bot.Event{Input: in})
	b.rt.DeliverNow(ctx, b.svc.Settle(ctx))
}

func (b *backend) Now() time.Time { return b.clock.Now() }

// Advance moves time in steps, stopping at every workload end, every
// reminder and every scheduled job on the way, so that each thing happens
// at its own time.
func (b *backend) Advance(ctx context.Context, d time.Duration) error {
	target := b.clock.Now().Add(d)
	for {
		now := b.clock.Now()
		next, scheduled := target, false
		if t := b.sim.NextEvent(); t.After(now) && t.Before(next) {
			next = t
		}
		if t := b.svc.NextWakeup(ctx, now); t.After(now) && t.Before(next) {
			next = t
		}
		if t := b.sched.Next(); t.After(now) && t.Before(next) {
			next, scheduled = t, true
		}
		b.clock.SetTime(next)
		// A stop only for a scheduled job (the sampler runs every 10
		// minutes) leaves the service's time-driven work to its own
		// stops, as before there were scheduled jobs.
		if err := b.syncAt(ctx, !scheduled); err != nil {
			return err
		}
		if !next.Before(target) {
			return nil
		}
	}
}

// sync brings the cluster to the clock's time, reports what happened and
// runs the scheduled jobs that are due.
func (b *backend) sync(ctx context.Context) error { return b.syncAt(ctx, true) }

// syncAt is sync; unless observe, the service looks only if something
// happens in the cluster by now, and does no sweep of its own otherwise.
// The service catches the simulated cluster up itself (Observe), in the
// same step as its records of what happened.
func (b *backend) syncAt(ctx context.Context, observe bool) error {
	if t := b.sim.NextEvent(); observe || (!t.IsZero() && !t.After(b.clock.Now())) {
		b.rt.DeliverNow(ctx, b.svc.Observe(ctx, nil))
	}
	b.rt.DeliverNow(ctx, b.sched.RunDue(ctx, b.clock.Now()))
	b.rt.DeliverNow(ctx, b.svc.Settle(ctx))
	return nil
}

// consoleHistory is the console's line history in the data directory.
const consoleHistory = "console_history"

// DefaultDataDir is the per-user state directory:
// $XDG_STATE_HOME/gpubot, else ~/.local/state/gpubot.
func DefaultDataDir() string {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "gpubot")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "gpubot")
	}
	return filepath.Join(os.TempDir(), "gpubot-"+strings.ReplaceAll(os.Getenv("USER"), "/", ""))
}
