package app

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/gpubot/gpubot/bot"
	slackbot "github.com/gpubot/gpubot/bot/slack"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/digest"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

// SlackOptions connect gpubot to Slack over Socket Mode. With no tokens
// gpubot runs the console.
type SlackOptions struct {
	// BotToken (xoxb-…) and AppToken (xapp-…); both or neither.
	BotToken, AppToken string
	// APIURL overrides the config's slack.apiURL (SLACK_API_URL).
	APIURL string
	// Workers handle commands concurrently; default 4.
	Workers int
	// TokenRecheck is how far apart a token that Slack refuses while
	// gpubot runs is checked again (three times, /readyz failing
	// meanwhile) before gpubot stops with exit status 1; default 10 s.
	TokenRecheck time.Duration
}

func (o SlackOptions) configured() bool { return o.BotToken != "" || o.AppToken != "" }

func (o SlackOptions) workers() int {
	if o.Workers <= 0 {
		return 4
	}
	return o.Workers
}

// estimateEvery is the least time between two computations of every
// estimate when changes keep coming.
const estimateEvery = time.Second

// dedupeTTL is how long delivery keys are remembered: far longer than
// Slack retries for.
const dedupeTTL = 24 * time.Hour

// procsPerCPU is how many goroutines may run Go code at once per CPU in
// Slack mode (GOMAXPROCS), unless GOMAXPROCS is set or a CPU limit holds
// Go below the machine's CPUs.
//
// An ack's goroutines wake up on its way (the envelope read from the
// socket, the inbox write's fsync returning): with one processor per
// CPU, all of them busy with the estimates' simulations and the
// handlers' work, each wake-up waits in Go's run queue behind those
// computations (up to 10 ms each before Go preempts it), a large part of
// the ack's p99 at 100 commands a second (BENCHMARKS.md, "Slack ack p99:
// where it goes"). With more processors than CPUs a woken
// goroutine finds an idle processor at once and the kernel, which
// favours a thread that was sleeping, runs it ahead of the computations.
// The total CPU is about the same. Under a CPU limit (a container's
// quota) more runnable threads would spend the quota in bursts and be
// throttled, so a limit below the machine's CPUs is left alone.
const procsPerCPU = 4

// slackProcs is the GOMAXPROCS Slack mode sets (0: leave it): env is
// $GOMAXPROCS, current Go's setting and cpus the machine's.
func slackProcs(env string, current, cpus int) int {
	if env != "" || current < cpus {
		return 0
	}
	return procsPerCPU * cpus
}

// raised counts the Slack bots running with GOMAXPROCS raised, and keeps
// what it was before the first of them.
var raised struct {
	sync.Mutex
	bots, before int
}

// raiseProcs sets GOMAXPROCS for Slack mode (slackProcs) and returns its
// undoing, for when the bot stops: the last bot of the process to stop
// puts back what the first found (tests run many bots in one process).
func raiseProcs(log *slog.Logger) (restore func()) {
	raised.Lock()
	defer raised.Unlock()
	if raised.bots > 0 {
		raised.bots++
		return unraise
	}
	cur := runtime.GOMAXPROCS(0)
	n := slackProcs(os.Getenv("GOMAXPROCS"), cur, runtime.NumCPU())
	if n <= cur {
		return func() {}
	}
	raised.bots, raised.before = 1, cur
	runtime.GOMAXPROCS(n)
	log.Debug("more Go processors than CPUs, so that acks are not held up behind long computations", "gomaxprocs", n, "cpus", runtime.NumCPU())
	return unraise
}

// unraise is a raiseProcs' undoing.
func unraise() {
	raised.Lock()
	defer raised.Unlock()
	if raised.bots--; raised.bots == 0 {
		runtime.GOMAXPROCS(raised.before)
	}
}

// newSlack builds the Slack adapter for svc, and the handler the runtime
// is to run: svc, or svc behind e-mail matching (slack.matchByEmail).
func newSlack(o Options, cfg *config.Config, svc *commands.Service, db *store.DB, log *slog.Logger, tel *telemetry, c clock.Clock) (*slackbot.Adapter, bot.Handler) {
	sc := cfg.Slack()
	url := o.Slack.APIURL
	if url == "" {
		url = sc.APIURL
	}
	pace := slackbot.Pacing{PerSecond: sc.MessagesPerSecond, Burst: sc.Burst}
	if pace.PerSecond == 0 {
		pace.PerSecond = 1
	}
	if pace.Burst == 0 {
		pace.Burst = 3
	}
	opts := []slackbot.Option{slackbot.WithLogger(log), slackbot.WithOutbox(db)}
	if o.Slack.TokenRecheck > 0 {
		opts = append(opts, slackbot.WithTokenRecheck(3, o.Slack.TokenRecheck))
	}
	ad := slackbot.New(slackbot.Config{BotToken: o.Slack.BotToken, AppToken: o.Slack.AppToken, APIURL: url, Pacing: pace},
		svc, db,
		append(opts,
			slackbot.WithDeduper(db, dedupeTTL, c),
			slackbot.WithObserver(func(method string, d time.Duration) { tel.slack.WithLabelValues(method).Observe(d.Seconds()) }),
		)...)
	if sc.MatchByEmail {
		return ad, ad.MatchByEmail(cfg.Settings().People).Handler(svc)
	}
	return ad, svc
}

// runSlackOnSim runs gpubot on Slack with the simulated cluster, which
// follows the wall clock (or o.Clock, in tests): a driver wakes at every
// workload end and reminder, and at least every SweepEvery.
func runSlackOnSim(ctx context.Context, o Options, cfg *config.Config, db *store.DB, log *slog.Logger) error {
	// Opened first, closed last: the runtime's workers use it to the end.
	inbox, err := openInbox(o.DataDir)
	if err != nil {
		return err
	}
	defer inbox.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clk := o.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	sim, fresh, err := simcluster.New(ctx, cfg.Cluster(), db, clk, simcluster.WithSavesByCaller(),
		simcluster.WithPodsReadyTimeout(cfg.Kubernetes().PodsReadyTimeout), simElastic(cfg))
	if err != nil {
		return err
	}
	if ahead := sim.Now().Sub(clk.Now()); !fresh && ahead > time.Minute {
		log.Warn("the simulated cluster's time is ahead of the clock (the console moved it); nothing happens in it until the clock catches up", "ahead", ahead.String())
	}
	tel := newTelemetry(db)
	eng, sched, err := newDigests(cfg, db, sim, log)
	if err != nil {
		return err
	}
	svc, err := commands.NewService(ctx, cfg.Settings(), commands.Deps{
		Cluster: sim, Requests: tel.watchRequests(db), IDs: db, Audit: tel.audit(db), Usage: db, Clock: clk, Commit: tel.watchCommits(db, db),
	}, append(simZombieOptions(cfg, db, sim, log), commands.WithLogger(log), commands.WithDigests(eng), commands.WithProvisioning(sim))...)
	if err != nil {
		return err
	}
	tel.watchCluster(svc, db, clk.Now)
	if err := addSweep(sched, cfg, svc); err != nil {
		return err
	}
	ids, err := svc.Seed(ctx, cfg.Seeds())
	if err != nil {
		return err
	}
	if err := seedUses(ctx, cfg, sim, ids); err != nil {
		return err
	}
	defer raiseProcs(log)()
	ad, handler := newSlack(o, cfg, svc, db, log, tel, clk)
	if err := ad.Check(ctx); err != nil {
		return err
	}
	tel.ready(ad.Ready)
	tel.watchSlack(ad)
	if o.Cluster.HTTPAddr != "" {
		stop, err := tel.serve(o.Cluster.HTTPAddr, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	rt := bot.New(handler, ad, bot.WithDeduper(db, dedupeTTL, clk), bot.WithLogger(log), bot.WithWorkers(o.Slack.workers()), bot.WithOutbox(db, false, clk),
		bot.WithInbox(inbox, dedupeTTL, clk), bot.WithHandledLog(db))
	// Outputs reach Slack in the order they were committed (a card before
	// the refresher's first estimate on it); the adapter's Send only queues.
	svc.SetOrderedDelivery(rt.DeliverNow)
	// What was not delivered before the last stop goes first (the
	// adapter's queue sends it once connected), then what was acked but
	// not handled is handled.
	if err := rt.Replay(ctx); err != nil {
		return err
	}
	if err := rt.Recover(ctx); err != nil {
		return err
	}
	startRuntime(ctx, rt, &wg)
	log.Info("gpubot starting on Slack with the simulated cluster", "config", cfg.Name(), "dataDir", o.DataDir, "fresh", fresh)
	every := o.Cluster.SweepEvery
	if every <= 0 {
		every = 30 * time.Second
	}
	wg.Add(2)
	go func() {
		defer wg.Done()
		driveSim(ctx, clk, sim, svc, sched, rt, every, log)
	}()
	go func() {
		defer wg.Done()
		// At most one computation a second, of the machine's time (it is
		// about CPU, not the simulated cluster's clock).
		svc.RunEstimates(ctx, clock.RealClock{}, estimateEvery, rt.Deliver)
	}()
	err = ad.Run(ctx, rt)
	log.Info("gpubot stopped", "err", err)
	return err
}

// startRuntime starts rt's workers; wg is done once they have stopped.
func startRuntime(ctx context.Context, rt *bot.Runtime, wg *sync.WaitGroup) {
	rt.Start(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		rt.Wait()
	}()
}

// driveSim keeps the simulated cluster at the clock's time: it catches up,
// reports what happened, runs the scheduled jobs that are due, and sleeps
// until the next workload end, reminder, scheduled job or sweep.
func driveSim(ctx context.Context, clk clock.Clock, sim *simcluster.Cluster, svc *commands.Service, sched *digest.Scheduler, rt *bot.Runtime, every time.Duration, log *slog.Logger) {
	for ctx.Err() == nil {
		now := clk.Now()
		rt.DeliverNow(ctx, svc.Observe(ctx, nil)) // catches the simulated cluster up
		rt.DeliverNow(ctx, sched.RunDue(ctx, now))
		next := now.Add(every)
		if t := sim.NextEvent(); t.After(now) && t.Before(next) {
			next = t
		}
		if t := svc.NextWakeup(ctx, now); t.After(now) && t.Before(next) {
			next = t
		}
		if t := sched.Next(); t.After(now) && t.Before(next) {
			next = t
		}
		d := next.Sub(clk.Now())
		if d <= 0 {
			continue
		}
		t := clk.NewTimer(d)
		if !clk.Now().Before(next) {
			// The clock moved past next meanwhile (a test stepping a
			// fake clock, whose timers fire only when it moves again).
			t.Stop()
			continue
		}
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}
