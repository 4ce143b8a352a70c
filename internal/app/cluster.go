package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/bot"
	"github.com/gpubot/gpubot/bot/console"
	slackbot "github.com/gpubot/gpubot/bot/slack"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/k8sbridge"
	"github.com/gpubot/gpubot/store"
)

// ClusterOptions connect gpubot to a real Kubernetes cluster with Kueue.
// With neither a kubeconfig nor InCluster, gpubot runs on its simulated
// cluster.
type ClusterOptions struct {
	// Kubeconfig is a kubeconfig file (the command line fills it from
	// --kubeconfig or $KUBECONFIG).
	Kubeconfig string
	// InCluster uses the pod's ServiceAccount.
	InCluster bool
	// HTTPAddr serves /healthz, /readyz and /metrics; "" serves nothing.
	HTTPAddr string
	// SweepEvery is how often time-driven work (reminders, estimate
	// refreshes, reconciliation) runs with a real cluster; default 30 s.
	SweepEvery time.Duration
}

func (o ClusterOptions) configured() bool { return o.Kubeconfig != "" || o.InCluster }

// bridgeConfig translates gpubot's configuration for the bridge.
func bridgeConfig(cfg *config.Config) k8sbridge.Config {
	set, cl, k := cfg.Settings(), cfg.Cluster(), cfg.Kubernetes()
	// Capacity comes from the cluster only: the configured simulated
	// nodes are not used there.
	bc := k8sbridge.Config{
		Flavors: cl.Flavors, Policy: cl.Policy,
		Priorities: map[string]int32{}, Templates: maps.Clone(k.JobTemplates),
		GPUResource: k.GPUResource, BlockLabel: k.BlockLabel, RackLabel: k.RackLabel, HostLabel: k.HostLabel,
		PodsReadyTimeout: k.PodsReadyTimeout,
		FlavorLabels:     k.FlavorLabels(), AcceleratorLabel: k.AcceleratorLabel, KueueNamespace: k.KueueNamespace,
	}
	for _, p := range set.Priorities {
		bc.Priorities[p.Name] = p.Value
	}
	for _, t := range set.Teams {
		bc.Teams = append(bc.Teams, k8sbridge.Team{Name: t.Name, Namespace: k.Namespaces[t.Name], LocalQueue: k.LocalQueues[t.Name]})
	}
	return bc
}

// runOnCluster is Run with a real cluster: real time, Kueue admitting,
// workload events from the bridge, and the console (or another chat) on top.
func runOnCluster(ctx context.Context, o Options, cfg *config.Config, db *store.DB, log *slog.Logger) error {
	// On return, stop the background work first, then wait for it, so
	// that nothing touches the store after Run closes it.
	// On Slack, what it acked is kept in the inbox's own file; opened
	// first, closed last: the runtime's workers use it to the end.
	var inbox *store.DB
	if o.onSlack() {
		var err error
		if inbox, err = openInbox(o.DataDir); err != nil {
			return err
		}
		defer inbox.Close()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Real time drives everything with a real cluster (o.Clock in tests).
	var clk clock.WithTicker = clock.RealClock{}
	if c, ok := o.Clock.(clock.WithTicker); ok {
		clk = c
	}
	tel := newTelemetry(db)
	br, err := k8sbridge.Dial(k8sbridge.Connection{Kubeconfig: o.Cluster.Kubeconfig, InCluster: o.Cluster.InCluster, Observe: tel.observeAPI},
		bridgeConfig(cfg), k8sbridge.WithLogger(log), k8sbridge.WithRequests(db))
	if err != nil {
		return err
	}
	tel.ready(func() error {
		if !br.Ready() {
			return errors.New("Kubernetes caches not synced")
		}
		return nil
	})
	tel.detail(func(ctx context.Context) []string {
		if !br.Ready() {
			return nil
		}
		return kueueDetail(ctx, br)
	})
	if o.Cluster.HTTPAddr != "" {
		stop, err := tel.serve(o.Cluster.HTTPAddr, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	warnings, err := br.Start(ctx)
	if err != nil {
		if errors.Is(err, k8sbridge.ErrKueueMissing) {
			return fmt.Errorf("connecting to the cluster: %w", err)
		}
		return fmt.Errorf("connecting to the cluster (%s): %w", clusterName(o.Cluster), err)
	}
	for _, w := range warnings {
		log.Warn("configuration and cluster disagree", "problem", w)
	}
	id, err := br.Identity(ctx)
	if err != nil {
		return err
	}
	if err := claimDataDir(ctx, db, o.DataDir, dataOwner{Kind: "kubernetes", UID: id.UID, Server: id.Server}); err != nil {
		return err
	}
	set := cfg.Settings()
	zombieOpts, err := clusterZombieOptions(cfg, db, br, log)
	if err != nil {
		return err
	}
	eng, sched, err := newDigests(cfg, db, br, log)
	if err != nil {
		return err
	}
	svc, err := commands.NewService(ctx, set, commands.Deps{
		Cluster: br, Requests: tel.watchRequests(db), IDs: db, Audit: tel.audit(db), Usage: db, Clock: clk, Commit: tel.watchCommits(db, db),
	}, append(zombieOpts, commands.WithLogger(log), commands.WithTracker(br), commands.WithDigests(eng), commands.WithKueueView(br), commands.WithProvisioning(br))...)
	if err != nil {
		return err
	}
	tel.watchCluster(svc, db, clk.Now)
	if err := addSweep(sched, cfg, svc); err != nil {
		return err
	}
	var (
		con     *console.Console
		ad      *slackbot.Adapter
		sender  bot.Sender
		handler bot.Handler = svc
	)
	if o.onSlack() {
		defer raiseProcs(log)()
		ad, handler = newSlack(o, cfg, svc, db, log, tel, clk)
		if err := ad.Check(ctx); err != nil {
			return err
		}
		tel.ready(ad.Ready)
		tel.watchSlack(ad)
		sender = ad
	} else {
		con, err = console.New(o.Stdout, set.People, console.As(o.As), console.Interactive(o.Interactive), console.In(set.Location),
			console.Files(filepath.Join(o.DataDir, "files")),
			console.History(filepath.Join(o.DataDir, consoleHistory)), console.Completion(svc.Vocabulary()))
		if err != nil {
			return err
		}
		sender = con
	}
	rtOpts := []bot.Option{bot.WithDeduper(db, dedupeTTL, clk), bot.WithLogger(log), bot.WithWorkers(o.Slack.workers()), bot.WithOutbox(db, ad == nil, clk)}
	if ad != nil {
		// Slack acks: keep what it acked, in the inbox's own file.
		rtOpts = append(rtOpts, bot.WithInbox(inbox, dedupeTTL, clk), bot.WithHandledLog(db))
	}
	rt := bot.New(handler, sender, rtOpts...)
	// Outputs reach chat in the order they were committed: what a call
	// decided before what Kueue does about it, a card before its updates.
	svc.SetOrderedDelivery(rt.DeliverNow)
	if err := rt.Replay(ctx); err != nil {
		return err
	}
	if err := rt.Recover(ctx); err != nil {
		return err
	}
	log.Info("gpubot starting on a Kubernetes cluster", "config", cfg.Name(), "cluster", clusterName(o.Cluster), "server", id.Server, "clusterUID", id.UID,
		"dataDir", o.DataDir, "slack", ad != nil)
	owned, err := br.Owned(ctx)
	if err != nil {
		return err
	}
	rt.DeliverNow(ctx, svc.Adopt(ctx, owned))
	wg.Add(3)
	go func() {
		defer wg.Done()
		br.Run(ctx, func(ctx context.Context, evs []allocator.Event) {
			rt.DeliverNow(ctx, svc.Observe(ctx, evs))
		})
	}()
	go func() {
		defer wg.Done()
		svc.RunEstimates(ctx, clock.RealClock{}, estimateEvery, rt.DeliverNow)
	}()
	rt.DeliverNow(ctx, svc.Observe(ctx, nil))
	// Post what was missed while gpubot was down, then let robfig/cron
	// fire the scheduled jobs in real time.
	rt.DeliverNow(ctx, sched.RunDue(ctx, clk.Now()))
	wg.Add(1)
	go func() {
		defer wg.Done()
		sched.RunCron(ctx, clk, rt.DeliverNow)
	}()
	every := o.Cluster.SweepEvery
	if every <= 0 {
		every = 30 * time.Second
	}
	go func() {
		defer wg.Done()
		t := clk.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
				rt.DeliverNow(ctx, svc.Observe(ctx, nil))
			}
		}
	}()
	if ad != nil {
		startRuntime(ctx, rt, &wg)
		err := ad.Run(ctx, rt)
		log.Info("gpubot stopped", "err", err)
		return err
	}
	if err := con.Run(ctx, o.Stdin, &liveBackend{rt: rt, clk: clk}); err != nil {
		return fmt.Errorf("reading the console: %w", err)
	}
	log.Info("gpubot stopped")
	return nil
}

func clusterName(o ClusterOptions) string {
	if o.InCluster {
		return "in-cluster"
	}
	return o.Kubeconfig
}

// liveBackend connects the console to a real cluster, where time is not
// the console's to move.
type liveBackend struct {
	rt  *bot.Runtime
	clk clock.PassiveClock
}

func (b *liveBackend) Process(ctx context.Context, in commands.Input) {
	b.rt.Process(ctx, bot.Event{Input: in})
}

func (b *liveBackend) Now() time.Time { return b.clk.Now() }

func (b *liveBackend) Advance(context.Context, time.Duration) error {
	return errors.New("time is real on a Kubernetes cluster; :advance works only on the simulated cluster")
}

// kueueDetail is what /readyz says about the cluster besides being ready:
// GPU nodes no flavor selects, and the Kueue features gpubot does not
// model (its estimates for the teams affected are approximate).
func kueueDetail(ctx context.Context, v commands.KueueView) []string {
	rep, err := v.KueueReport(ctx)
	if err != nil {
		return []string{"reading what Kueue says: " + err.Error()}
	}
	var out []string
	for _, u := range rep.Unmatched {
		out = append(out, "unmatched nodes: "+u)
	}
	for _, u := range rep.Approximate {
		teams := "all teams"
		if len(u.Queues) > 0 {
			teams = strings.Join(u.Queues, ", ")
		}
		out = append(out, fmt.Sprintf("not modelled (estimates approximate for %s): %s: %s", teams, u.Feature, u.Detail))
	}
	for _, f := range rep.Flavors {
		if f.Nodes == 0 && !f.Elastic {
			out = append(out, fmt.Sprintf("flavor %s has no nodes (it selects %s); work there waits until nodes appear", f.Flavor, f.Selects))
		}
	}
	return out
}
