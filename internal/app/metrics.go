package app

import (
	"context"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// The collectors behind /metrics that read gpubot's state at each scrape,
// and the store wrapper that observes admissions. README's "Metrics" lists
// every metric; deploy/grafana/gpubot.json charts them.

// scrapeTimeout bounds what one scrape may spend reading the store or the
// cluster.
const scrapeTimeout = 5 * time.Second

// watchRequests observes, on its way to rs, every admission of a request:
// the time from the request to it goes into gpubot_request_wait_seconds.
func (t *telemetry) watchRequests(rs commands.RequestStore) commands.RequestStore {
	return admissionWatch{RequestStore: rs, wait: t.wait}
}

type admissionWatch struct {
	commands.RequestStore
	wait *prometheus.HistogramVec
}

func (w admissionWatch) PutRequest(ctx context.Context, r records.Request) error {
	admitted := false
	if r.State == records.StateRunning && !r.AdmittedAt.IsZero() {
		old, err := w.GetRequest(ctx, r.ID)
		admitted = err != nil || !old.AdmittedAt.Equal(r.AdmittedAt)
	}
	if err := w.RequestStore.PutRequest(ctx, r); err != nil {
		return err
	}
	if admitted && r.Origin != "seed" {
		w.wait.WithLabelValues(r.Team, r.Priority).Observe(max(r.AdmittedAt.Sub(r.CreatedAt), 0).Seconds())
	}
	return nil
}

// watchCommits observes, on their way to c, the admissions and decisions
// in each committed call, as watchRequests and audit do for single
// writes.
func (t *telemetry) watchCommits(c commands.Committer, rs commands.RequestStore) commands.Committer {
	return commitWatch{c: c, rs: rs, t: t}
}

type commitWatch struct {
	c  commands.Committer
	rs commands.RequestStore
	t  *telemetry
}

func (w commitWatch) Commit(ctx context.Context, ws records.Writes, at time.Time) ([]uint64, error) {
	var admitted []records.Request
	for _, r := range ws.Requests {
		if r.State != records.StateRunning || r.AdmittedAt.IsZero() || r.Origin == "seed" {
			continue
		}
		if old, err := w.rs.GetRequest(ctx, r.ID); err != nil || !old.AdmittedAt.Equal(r.AdmittedAt) {
			admitted = append(admitted, r)
		}
	}
	seqs, err := w.c.Commit(ctx, ws, at)
	if err != nil {
		return nil, err
	}
	for _, r := range admitted {
		w.t.wait.WithLabelValues(r.Team, r.Priority).Observe(max(r.AdmittedAt.Sub(r.CreatedAt), 0).Seconds())
	}
	for _, e := range ws.Audit {
		w.t.decisions.WithLabelValues(e.Action, e.Outcome).Inc()
	}
	return seqs, nil
}

// requestCollector reports requests by state, pending requests by team,
// how many waiting requests have a start estimate, and how far first
// start estimates were from actual starts, read from the store.
type requestCollector struct{ requests commands.RequestStore }

var (
	descRequests = prometheus.NewDesc("gpubot_requests", "Requests by state.", []string{"state"}, nil)
	descPending  = prometheus.NewDesc("gpubot_requests_pending",
		"Requests waiting, by team: queued in the cluster, or held for approval (state).", []string{"team", "state"}, nil)
	descCoverage = prometheus.NewDesc("gpubot_estimate_coverage_ratio",
		"Share of queued requests whose last start estimate is known (a range), not a fallback; 1 when none is queued.", nil, nil)
	descEstErr = prometheus.NewDesc("gpubot_estimate_error_seconds",
		"Absolute error of first start estimates (middle of the range) against actual admissions, over requests that started.", nil, nil)
)

func (c *requestCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descRequests
	ch <- descPending
	ch <- descCoverage
	ch <- descEstErr
}

func (c *requestCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	all, err := c.requests.ListRequests(ctx, nil)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descRequests, err)
		return
	}
	by := map[records.State]int{}
	type teamState struct {
		team  string
		state records.State
	}
	pending := map[teamState]int{}
	queued, known := 0, 0
	var errs []float64
	for _, r := range all {
		by[r.State]++
		switch r.State {
		case records.StateQueued:
			queued++
			if r.Estimate != nil && r.Estimate.Known {
				known++
			}
			fallthrough
		case records.StateAwaitingApproval:
			pending[teamState{r.Team, r.State}]++
		}
		if e := r.FirstEstimate; e != nil && e.Known && !r.AdmittedAt.IsZero() {
			mid := e.Earliest.Add(e.Latest.Sub(e.Earliest) / 2)
			d := r.AdmittedAt.Sub(mid)
			errs = append(errs, max(d, -d).Seconds())
		}
	}
	for _, s := range []records.State{records.StateAwaitingApproval, records.StateQueued, records.StateRunning, records.StateFinished,
		records.StateCancelled, records.StateDenied, records.StateLost} {
		ch <- prometheus.MustNewConstMetric(descRequests, prometheus.GaugeValue, float64(by[s]), string(s))
	}
	for k, n := range pending {
		ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(n), k.team, string(k.state))
	}
	coverage := 1.0
	if queued > 0 {
		coverage = float64(known) / float64(queued)
	}
	ch <- prometheus.MustNewConstMetric(descCoverage, prometheus.GaugeValue, coverage)
	// A summary: its quantiles are exact over every started request.
	slices.Sort(errs)
	q := map[float64]float64{}
	sum := 0.0
	for _, e := range errs {
		sum += e
	}
	if len(errs) > 0 {
		for _, p := range []float64{0.5, 0.9, 0.99} {
			q[p] = errs[min(len(errs)-1, int(p*float64(len(errs))))]
		}
	}
	ch <- prometheus.MustNewConstSummary(descEstErr, uint64(len(errs)), sum, q)
}

// capacitySource is the capacity view of the cluster; *commands.Service
// satisfies it.
type capacitySource interface {
	Capacity(ctx context.Context) ([]allocator.FlavorCapacity, error)
}

var descGPUs = prometheus.NewDesc("gpubot_gpus",
	"GPUs by flavor and state: used (admitted work), free (free and able to host a typical request) and fragmented "+
		"(free but, on the recent request mix, expected not to host one: DESIGN.md's measure (a)). The three sum to the flavor's GPUs.",
	[]string{"flavor", "state"}, nil)

// gpuCollector reports the cluster's GPUs by flavor and state.
type gpuCollector struct{ src capacitySource }

func (c gpuCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descGPUs }

func (c gpuCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	fcs, err := c.src.Capacity(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descGPUs, err)
		return
	}
	for _, f := range fcs {
		frag := min(f.Fragmented, float64(f.Free))
		ch <- prometheus.MustNewConstMetric(descGPUs, prometheus.GaugeValue, float64(f.Used), f.Flavor, "used")
		ch <- prometheus.MustNewConstMetric(descGPUs, prometheus.GaugeValue, float64(f.Free)-frag, f.Flavor, "free")
		ch <- prometheus.MustNewConstMetric(descGPUs, prometheus.GaugeValue, frag, f.Flavor, "fragmented")
	}
}

// zombieSource lists zombies whose waste overlaps [from, to). The store
// of the zombie detection satisfies it; until it does, no zombie metric is
// served.
type zombieSource interface {
	Zombies(ctx context.Context, from, to time.Time) ([]records.Zombie, error)
}

var (
	descZombies    = prometheus.NewDesc("gpubot_zombies", "Open zombies (admitted work holding GPUs without using them), by kind.", []string{"kind"}, nil)
	descZombieGPUs = prometheus.NewDesc("gpubot_zombie_gpus", "GPUs held by open zombies, by kind.", []string{"kind"}, nil)
)

// zombieCollector reports the open zombies at the clock's time.
type zombieCollector struct {
	src zombieSource
	now func() time.Time
}

func (c zombieCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descZombies
	ch <- descZombieGPUs
}

func (c zombieCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	now := c.now()
	zs, err := c.src.Zombies(ctx, now, now.Add(time.Nanosecond))
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descZombies, err)
		return
	}
	count, gpus := map[records.ZombieKind]int{}, map[records.ZombieKind]int{}
	for _, k := range []records.ZombieKind{records.ZombiePodsNotReady, records.ZombiePastEnd, records.ZombieIdle} {
		count[k], gpus[k] = 0, 0
	}
	for _, z := range zs {
		if z.Outcome != records.ZombieOpen {
			continue
		}
		count[z.Kind]++
		gpus[z.Kind] += z.GPUs
	}
	for k, n := range count {
		ch <- prometheus.MustNewConstMetric(descZombies, prometheus.GaugeValue, float64(n), string(k))
		ch <- prometheus.MustNewConstMetric(descZombieGPUs, prometheus.GaugeValue, float64(gpus[k]), string(k))
	}
}

// slackState is what the Slack adapter tells metrics; *slackbot.Adapter
// satisfies it.
type slackState interface {
	Ready() error
	Pending() int
	RateLimited() uint64
}

// refreshSource says how the estimates were kept current;
// *commands.Service satisfies it.
type refreshSource interface {
	RefreshStats() commands.RefreshStats
}

var (
	descEstChanges = prometheus.NewDesc("gpubot_estimate_changes_total",
		"Changes of the cluster or the queue (and the periodic refresh) that marked the start estimates stale.", nil, nil)
	descEstRefreshes = prometheus.NewDesc("gpubot_estimate_refreshes_total",
		"Recomputations of every queued request's start estimate, by what it took: simulated (the queue simulated again), "+
			"reused (rebuilt from the last simulations after an admission they predicted), unchanged (nothing had changed). "+
			"Far fewer than gpubot_estimate_changes_total: changes that come while one is computed cost one more.", []string{"result"}, nil)
	descEstSeconds = prometheus.NewDesc("gpubot_estimate_computing_seconds_total",
		"Time spent computing start estimates (off the command path).", nil, nil)
	descEstCheckpoints = prometheus.NewDesc("gpubot_estimate_from_checkpoints_total",
		"Request commands whose own start estimate came from the last computation's checkpoints (milliseconds), "+
			"not a simulation of their own (the cluster had not changed since but for the request).", nil, nil)
)

// refreshCollector reports the estimate refresher's counts.
type refreshCollector struct{ src refreshSource }

func (c refreshCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descEstChanges
	ch <- descEstRefreshes
	ch <- descEstSeconds
	ch <- descEstCheckpoints
}

func (c refreshCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.src.RefreshStats()
	ch <- prometheus.MustNewConstMetric(descEstChanges, prometheus.CounterValue, float64(st.Changes))
	ch <- prometheus.MustNewConstMetric(descEstRefreshes, prometheus.CounterValue, float64(st.Simulated), "simulated")
	ch <- prometheus.MustNewConstMetric(descEstRefreshes, prometheus.CounterValue, float64(st.Reused), "reused")
	ch <- prometheus.MustNewConstMetric(descEstRefreshes, prometheus.CounterValue, float64(st.Unchanged), "unchanged")
	ch <- prometheus.MustNewConstMetric(descEstSeconds, prometheus.CounterValue, st.Computing.Seconds())
	ch <- prometheus.MustNewConstMetric(descEstCheckpoints, prometheus.CounterValue, float64(st.FromCheckpoints))
}

// watchCluster adds the GPU metrics of svc's cluster, the estimate
// refresher's when svc reports them, and the zombie metrics when the
// store keeps zombies.
func (t *telemetry) watchCluster(svc capacitySource, st any, now func() time.Time) {
	t.reg.MustRegister(gpuCollector{src: svc})
	if rs, ok := svc.(refreshSource); ok {
		t.reg.MustRegister(refreshCollector{src: rs})
	}
	if zs, ok := st.(zombieSource); ok {
		t.reg.MustRegister(zombieCollector{src: zs, now: now})
	}
}

// watchSlack adds the Slack connection's metrics.
func (t *telemetry) watchSlack(s slackState) {
	t.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gpubot_slack_connected",
			Help: "1 while a Socket Mode connection to Slack is up, else 0."}, func() float64 {
			if s.Ready() != nil {
				return 0
			}
			return 1
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gpubot_slack_outbound_queue_calls",
			Help: "Slack Web API calls waiting in gpubot's outbound queue."}, func() float64 { return float64(s.Pending()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gpubot_slack_rate_limited_total",
			Help: "Slack Web API calls answered with HTTP 429; each was held back for its Retry-After and tried again."},
			func() float64 { return float64(s.RateLimited()) }),
	)
}
