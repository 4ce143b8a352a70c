package commands_test

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/internal/config"
	"github.com/gpubot/gpubot/records"
	"github.com/gpubot/gpubot/simcluster"
	"github.com/gpubot/gpubot/store"
)

// t0 is when every test starts: Tuesday 08:00 UTC (09:00 in the bundled
// example's Europe/Berlin).
var t0 = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

// small is a 32-GPU cluster (two racks of two 8-GPU nodes) shared by two
// teams without a cohort, so that each waits for its own quota:
//
//	nlp     nominal 16, lead bob, member alice; preempts its own lower-priority work
//	vision  nominal 16, lead erin, member dave; never preempts
//
// carol is the admin. Requests for more than 8 GPUs or at priority high
// need approval. Tests change it with strings.Replace.
const small = `timezone: UTC
priorities: [{name: low, value: 100}, {name: normal, value: 200}, {name: high, value: 500}]
defaultPriority: normal
requests: {maxDuration: 2d, endWarning: 15m}
approval: {aboveGPUs: 8, priorities: [high]}
templates: [default, dev-box]
flavors: [{name: h100, gpusPerNode: 8, nodes: {racksPerBlock: 2, nodesPerRack: 2}}]
people:
  - {name: alice, slackID: U0ALICE}
  - {name: bob, slackID: U0BOB}
  - {name: carol, slackID: U0CAROL, admin: true}
  - {name: dave, slackID: U0DAVE}
  - {name: erin, slackID: U0ERIN}
teams:
  - name: nlp
    channel: "#nlp"
    leads: [bob]
    members: [alice]
    quota: {h100: {nominal: 16}}
    preemption: {withinTeam: LowerPriority}
  - name: vision
    channel: "#vision"
    leads: [erin]
    members: [dave]
    quota: {h100: {nominal: 16}}
`

// pooled is small with both teams in one cohort that lend and borrow, and
// approval needed only for borrowing.
var pooled = strings.NewReplacer(
	"approval: {aboveGPUs: 8, priorities: [high]}", "approval: {borrowing: true}",
	"    channel: \"#nlp\"\n", "    cohort: pool\n    channel: \"#nlp\"\n",
	"    channel: \"#vision\"\n", "    cohort: pool\n    channel: \"#vision\"\n",
	"preemption: {withinTeam: LowerPriority}", "preemption: {withinTeam: LowerPriority, reclaimWithinCohort: Any}",
).Replace(small) + "    preemption: {withinTeam: LowerPriority, reclaimWithinCohort: Any}\n"

func parse(t testing.TB, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("config:\n%v", err)
	}
	return cfg
}

func exampleConfig(t testing.TB) *config.Config {
	t.Helper()
	cfg, err := config.Default()
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// cluster wraps the simulated cluster so that tests can make it fail.
type cluster struct {
	*simcluster.Cluster
	failApply     error // Apply fails with it, doing nothing
	panicSnapshot bool
	// hide leaves these workloads out of snapshots, as a cluster whose
	// model cannot place them does.
	hide []string
	// drop, queue → flavor, takes the flavor out of the queue in snapshots,
	// as a ClusterQueue edited behind gpubot's configuration does.
	drop    map[string]string
	applied []commands.Op
}

func (c *cluster) Snapshot(ctx context.Context) (*allocator.Snapshot, error) {
	if c.panicSnapshot {
		panic("snapshot exploded")
	}
	return c.hiding(c.Cluster.Snapshot(ctx))
}

// hiding returns snap, or a copy of it without the hidden workloads and
// dropped flavors.
func (c *cluster) hiding(snap *allocator.Snapshot, err error) (*allocator.Snapshot, error) {
	if err != nil || len(c.hide)+len(c.drop) == 0 {
		return snap, err
	}
	if len(c.drop) > 0 {
		cl := *snap.Cluster()
		cl.Queues = slices.Clone(cl.Queues)
		for i, q := range cl.Queues {
			if f, ok := c.drop[q.Name]; ok {
				cl.Queues[i].Flavors = slices.DeleteFunc(slices.Clone(q.Flavors), func(g string) bool { return g == f })
				cl.Queues[i].Quotas = maps.Clone(q.Quotas)
				delete(cl.Queues[i].Quotas, f)
			}
		}
		if snap, err = allocator.NewSnapshot(&cl, snap.Now(), snap.Workloads(), snap.Usage()); err != nil {
			return nil, err
		}
	} else {
		snap = snap.Clone()
	}
	for _, id := range c.hide {
		_, _ = snap.Release(id)
	}
	return snap, nil
}

// SharedSnapshot, the service's reads' view, hides the same workloads as
// Snapshot, else the reads would see what the writes do not. It does not
// panic: panicSnapshot is for a write's copy.
func (c *cluster) SharedSnapshot(ctx context.Context) (*allocator.Snapshot, error) {
	return c.hiding(c.Cluster.SharedSnapshot(ctx))
}

func (c *cluster) Apply(ctx context.Context, op commands.Op) ([]allocator.Event, error) {
	if c.failApply != nil {
		return nil, c.failApply
	}
	c.applied = append(c.applied, op)
	return c.Cluster.Apply(ctx, op)
}

// logBuffer is a goroutine-safe log destination.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// env is a Service over a real store, the real simulated cluster and a
// fake clock. Its cleanup checks that no request is in two places.
type env struct {
	t       *testing.T
	ctx     context.Context
	cfg     *config.Config
	db      *store.DB
	sim     *simcluster.Cluster
	cluster *cluster
	api     *apiCluster // set by withAPI
	clock   *clocktesting.FakeClock
	svc     *commands.Service
	log     *logBuffer
}

type envOption func(*envOptions)

type envOptions struct {
	seed    bool
	zombies *commands.ZombiePolicy
	util    commands.Utilization
	others  commands.Others
	digests commands.Digester
	// api makes the service see the simulated cluster as a real one: not
	// a Stepper, its operations API calls made outside the write section.
	api *apiCluster
	// engine computes the service's estimates.
	engine commands.EstimateEngine
	// commit wraps the store as the service's Committer.
	commit func(commands.Committer) commands.Committer
	// usage wraps the store as the service's UsageLog.
	usage func(commands.UsageLog) commands.UsageLog
	// requests wraps the store as the service's RequestStore.
	requests func(commands.RequestStore) commands.RequestStore
	elastic  map[string]simcluster.ElasticFlavor
}

// withElastic gives the simulated cluster elastic flavors and lets the
// service follow their provisioning.
func withElastic(fs map[string]simcluster.ElasticFlavor) envOption {
	return func(o *envOptions) { o.elastic = fs }
}

// withRequests makes the service read and write requests through wrap(db).
func withRequests(wrap func(commands.RequestStore) commands.RequestStore) envOption {
	return func(o *envOptions) { o.requests = wrap }
}

// withDigests answers /gpu digest and /gpu report with d.
func withDigests(d commands.Digester) envOption { return func(o *envOptions) { o.digests = d } }

// seeded runs Service.Seed with the configuration's seeds.
func seeded(o *envOptions) { o.seed = true }

// withZombies turns the zombie sweep on with policy p, keeping zombies in
// the store; idle GPUs are measured by the simulated cluster unless
// withUtil says otherwise.
func withZombies(p commands.ZombiePolicy) envOption {
	return func(o *envOptions) { o.zombies = &p }
}

// withUtil measures GPU utilization with u (nil: no utilization source).
func withUtil(u commands.Utilization) envOption {
	return func(o *envOptions) {
		if u == nil {
			o.util = noUtil{}
		} else {
			o.util = u
		}
	}
}

// withOthers lets the sweep see work gpubot does not follow.
func withOthers(x commands.Others) envOption { return func(o *envOptions) { o.others = x } }

// noUtil marks "no utilization source" in envOptions.
type noUtil struct{ commands.Utilization }

func newEnv(t *testing.T, cfg *config.Config, opts ...envOption) *env {
	t.Helper()
	var o envOptions
	for _, f := range opts {
		f(&o)
	}
	ctx := context.Background()
	db, err := store.Open(filepath.Join(t.TempDir(), "gpubot.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	e := &env{t: t, ctx: ctx, cfg: cfg, db: db, clock: clocktesting.NewFakeClock(t0), log: &logBuffer{}}
	// Seen as a real cluster (withAPI) the simulated one saves itself, as
	// a real one keeps its own state; otherwise the service commits its
	// state with its records, as gpubot runs it.
	simOpts := []simcluster.Option{simcluster.WithElastic(o.elastic)}
	if o.api == nil {
		simOpts = append(simOpts, simcluster.WithSavesByCaller())
	}
	sim, _, err := simcluster.New(ctx, cfg.Cluster(), db, e.clock, simOpts...)
	if err != nil {
		t.Fatal(err)
	}
	e.sim = sim
	e.cluster = &cluster{Cluster: sim}
	set := cfg.Settings()
	svcOpts := []commands.Option{commands.WithLogger(slog.New(slog.NewTextHandler(e.log, nil)))}
	if o.zombies != nil {
		set.Zombies = *o.zombies
		svcOpts = append(svcOpts, commands.WithZombies(db))
		switch u := o.util.(type) {
		case nil:
			svcOpts = append(svcOpts, commands.WithUtilization(sim))
		case noUtil:
		default:
			svcOpts = append(svcOpts, commands.WithUtilization(u))
		}
		if o.others != nil {
			svcOpts = append(svcOpts, commands.WithOthers(o.others))
		}
	}
	if o.digests != nil {
		svcOpts = append(svcOpts, commands.WithDigests(o.digests))
	}
	var cl commands.Cluster = e.cluster
	if o.api != nil {
		o.api.sim = sim
		cl = o.api
		e.api = o.api
	}
	if o.engine != nil {
		svcOpts = append(svcOpts, commands.WithEstimateEngine(o.engine))
	}
	var usageLog commands.UsageLog = db
	if o.usage != nil {
		usageLog = o.usage(db)
	}
	var committer commands.Committer = db
	if o.commit != nil {
		committer = o.commit(db)
	}
	var requests commands.RequestStore = db
	if o.requests != nil {
		requests = o.requests(db)
	}
	if o.elastic != nil {
		svcOpts = append(svcOpts, commands.WithProvisioning(sim))
	}
	e.svc, err = commands.NewService(ctx, set, commands.Deps{
		Cluster: cl, Requests: requests, IDs: db, Commit: committer, Audit: db, Usage: usageLog, Clock: e.clock,
	}, svcOpts...)
	if err != nil {
		t.Fatal(err)
	}
	if o.seed {
		if _, err := e.svc.Seed(ctx, cfg.Seeds()); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(e.checkInvariants)
	return e
}

func has[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}

// checkInvariants fails the test if a request is in two places: a running
// request's workload must be admitted in the cluster where the request
// says, a queued one pending, and the others absent; every workload in
// the cluster must belong to a request.
func (e *env) checkInvariants() {
	t := e.t
	snap, err := e.sim.Snapshot(e.ctx)
	if err != nil {
		t.Errorf("invariants: %v", err)
		return
	}
	rs, err := e.db.ListRequests(e.ctx, nil)
	if err != nil {
		t.Errorf("invariants: %v", err)
		return
	}
	checks, err := e.sim.ProvisioningChecks(e.ctx)
	if err != nil {
		t.Errorf("invariants: %v", err)
		return
	}
	known := map[string]bool{}
	for _, r := range rs {
		// Provisioned work holds its quota while its nodes come (its check
		// Pending): reserved, not admitted, as with Kueue.
		reserving := has(checks, r.ID) && checks[r.ID].State == commands.CheckPending
		known[r.ID] = true
		w, in := snap.Workload(r.ID)
		switch {
		case r.State == records.StateRunning && (!in || w.Admission == nil):
			t.Errorf("invariant: %s is running but its workload is not admitted in the cluster (present: %v)", r.ID, in)
		case r.State == records.StateRunning && (!w.Admission.At.Equal(r.AdmittedAt) || !slices.Equal(w.Admission.Nodes, r.Nodes)):
			t.Errorf("invariant: %s runs since %s on %v, but the cluster admitted it at %s on %v", r.ID, r.AdmittedAt, r.Nodes, w.Admission.At, w.Admission.Nodes)
		case r.State == records.StateQueued && (!in || (w.Admission != nil && !reserving)):
			t.Errorf("invariant: %s is queued but its workload is not pending in the cluster (present: %v)", r.ID, in)
		case r.State != records.StateRunning && r.State != records.StateQueued && in:
			t.Errorf("invariant: %s is %s but still in the cluster", r.ID, r.State)
		}
		if r.State == records.StateRunning && r.Duration != w.Duration {
			t.Errorf("invariant: %s asks for %s but its workload for %s", r.ID, r.Duration, w.Duration)
		}
	}
	for _, w := range snap.Workloads() {
		if !known[w.ID] {
			t.Errorf("invariant: workload %s in the cluster belongs to no request", w.ID)
		}
	}
}

// do handles a typed command from user, then lets the estimates settle
// (as the console does): the posts of estimates that moved come after.
func (e *env) do(user, text string) []commands.Output {
	e.t.Helper()
	outs := e.svc.Handle(e.ctx, commands.Input{User: user, Text: text})
	return append(outs, e.svc.Settle(e.ctx)...)
}

// press handles a button press from user, then lets the estimates settle.
func (e *env) press(user string, verb commands.Verb, id, arg string) []commands.Output {
	e.t.Helper()
	outs := e.svc.Handle(e.ctx, commands.Input{User: user, Action: &commands.Action{Name: verb, Request: id, Arg: arg}})
	return append(outs, e.svc.Settle(e.ctx)...)
}

// advance moves time by d as the console does: the cluster catches up and
// the service observes at every workload end and every reminder on the
// way, then at the end.
func (e *env) advance(d time.Duration) []commands.Output {
	e.t.Helper()
	target := e.clock.Now().Add(d)
	var outs []commands.Output
	for {
		now := e.clock.Now()
		next := target
		if t := e.sim.NextEvent(); t.After(now) && t.Before(next) {
			next = t
		}
		if t := e.svc.NextWakeup(e.ctx, now); t.After(now) && t.Before(next) {
			next = t
		}
		e.clock.SetTime(next)
		outs = append(outs, e.sync()...)
		if !next.Before(target) {
			return outs
		}
	}
}

// observe hands the service events from the cluster, then the estimates
// settle.
func (e *env) observe(evs []allocator.Event) []commands.Output {
	e.t.Helper()
	outs := e.svc.Observe(e.ctx, evs)
	return append(outs, e.svc.Settle(e.ctx)...)
}

// sync lets the service bring the cluster to the clock's time and
// observe what happened, then the estimates settle. Seen as a real
// cluster (withAPI), the cluster moves by itself and reports its events,
// as the Kubernetes bridge does.
func (e *env) sync() []commands.Output {
	e.t.Helper()
	var evs []allocator.Event
	if e.api != nil {
		var err error
		if evs, err = e.sim.Advance(e.ctx); err != nil {
			e.t.Fatal(err)
		}
	}
	outs := e.svc.Observe(e.ctx, evs)
	return append(outs, e.svc.Settle(e.ctx)...)
}

func (e *env) req(id string) records.Request {
	e.t.Helper()
	r, err := e.db.GetRequest(e.ctx, id)
	if err != nil {
		e.t.Fatalf("request %s: %v", id, err)
	}
	return r
}

func (e *env) requests() map[string]records.Request {
	e.t.Helper()
	rs, err := e.db.ListRequests(e.ctx, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]records.Request{}
	for _, r := range rs {
		out[r.ID] = r
	}
	return out
}

// workloads shows the cluster's workloads: "r1 pending" or "r1 on [nodes]".
func (e *env) workloads() []string {
	e.t.Helper()
	snap, err := e.sim.Snapshot(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return placed(snap)
}

// audit shows the audit log, or the entries about target, as
// "actor action target outcome".
func (e *env) audit(target string) []string {
	e.t.Helper()
	es, err := e.db.Audit(e.ctx, store.AuditQuery{Target: target})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, a := range es {
		out = append(out, strings.Join(slices.DeleteFunc([]string{a.Actor, a.Action, a.Target, a.Outcome}, func(s string) bool { return s == "" }), " "))
	}
	return out
}

func (e *env) lastAudit() records.AuditEntry {
	e.t.Helper()
	es, err := e.db.Audit(e.ctx, store.AuditQuery{Limit: 1})
	if err != nil || len(es) == 0 {
		e.t.Fatalf("last audit entry: %v (%d entries)", err, len(es))
	}
	return es[0]
}

func (e *env) auditEntries(target string) []records.AuditEntry {
	e.t.Helper()
	es, err := e.db.Audit(e.ctx, store.AuditQuery{Target: target})
	if err != nil {
		e.t.Fatal(err)
	}
	return es
}

// usage is every usage record of the last 30 days.
func (e *env) usage() []records.UsageRecord {
	e.t.Helper()
	us, err := e.db.Usage(e.ctx, e.clock.Now().Add(-30*24*time.Hour), e.clock.Now().Add(time.Hour))
	if err != nil {
		e.t.Fatal(err)
	}
	return us
}

// refresher runs e's estimate refresher in the background on a fake
// clock of its own (period 1 s), delivering to deliver, until stop, which
// returns once it has stopped (also at the test's end).
func (e *env) refresher(deliver func(context.Context, []commands.Output)) (clk *clocktesting.FakeClock, stop func()) {
	clk = clocktesting.NewFakeClock(t0)
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.svc.RunEstimates(ctx, clk, time.Second, deliver)
	}()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	e.t.Cleanup(stop)
	return clk, stop
}
