package digest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// The capacity sentence: what the queue was bound by over the period
// (from the samples), and what the what-if engine of /gpu whatif +N
// (commands.WithCapacity and allocator.Estimates, with the service's
// learned runtimes) says more GPUs, or a higher borrowing limit, would do
// to the waits of the work waiting now.

// whatIfs are the estimates of the work waiting now, as things are and
// under each candidate change.
type whatIfs struct {
	now     time.Time
	pending map[string]allocator.Workload
	before  map[string]allocator.Estimate
	changes []change
}

// change is one candidate: more GPUs of a flavor, or a higher borrowing
// limit for a team.
type change struct {
	hardware bool
	label    string // "+16 h100", "raising vision's h100 borrowing limit by 16"
	// after has the estimates of what still waits after the change's
	// first cycle; a workload missing from it starts at once.
	after map[string]allocator.Estimate
}

// extraGPUs are the capacity what-ifs tried per flavor, rounded up to
// whole nodes; extraBorrowing is the raise tried for each borrowing limit.
var (
	extraGPUs      = []int{8, 16}
	extraBorrowing = 16
)

// whatIfs computes (or returns the cached) what-ifs at now.
func (e *Engine) whatIfs(ctx context.Context, now time.Time) (*whatIfs, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cache != nil && e.cache.now.Equal(now) {
		return e.cache, nil
	}
	snap, err := e.src.Cluster.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster for the what-ifs: %w", err)
	}
	reqs, err := e.src.Requests.ListRequests(ctx, func(r records.Request) bool { return commands.EstimateInput(r, now) })
	if err != nil {
		return nil, fmt.Errorf("reading requests for the what-ifs: %w", err)
	}
	prio := map[string]int32{}
	for _, p := range e.set.Priorities {
		prio[p.Name] = p.Value
	}
	w := &whatIfs{now: now, pending: map[string]allocator.Workload{}}
	for _, id := range snap.Order() {
		wl, _ := snap.Workload(id)
		w.pending[id] = wl
	}
	if len(w.pending) > 0 {
		opts := commands.EstimateOptions(reqs, now, e.horizon, prio)
		w.before = allocator.Estimates(snap, opts)
		try := func(hardware bool, label string, changed *allocator.Snapshot, err error) {
			if err != nil {
				e.log.Debug("what-if not possible", "change", label, "err", err)
				return
			}
			changed.Schedule()
			w.changes = append(w.changes, change{hardware: hardware, label: label, after: allocator.Estimates(changed, opts)})
		}
		for _, fl := range snap.Cluster().Flavors {
			seen := map[int]bool{}
			for _, g := range extraGPUs {
				nodes := (g + fl.GPUsPerNode - 1) / fl.GPUsPerNode
				if seen[nodes] {
					continue
				}
				seen[nodes] = true
				changed, _, err := commands.WithCapacity(snap, fl, g)
				try(true, fmt.Sprintf("+%d %s", nodes*fl.GPUsPerNode, fl.Name), changed, err)
			}
		}
		for _, q := range snap.Cluster().Queues {
			for _, f := range q.Flavors {
				if quota, ok := q.Quotas[f]; !ok || q.Cohort == "" || quota.BorrowingLimit == nil {
					continue
				}
				changed, _, err := commands.WithBorrowingLimit(snap, q.Name, f, extraBorrowing)
				try(false, fmt.Sprintf("raising %s's %s borrowing limit by %d", q.Name, f, extraBorrowing), changed, err)
			}
		}
	}
	e.cache = w
	return w, nil
}

// p95 is the nearest-rank 95th percentile of the estimated waits (the
// middle of each range, as /gpu whatif +N compares them) of ids; an id
// missing from ests starts at once, an unknown estimate counts as the
// horizon.
func (w *whatIfs) p95(ids []string, ests map[string]allocator.Estimate, horizon time.Duration) time.Duration {
	ds := make([]time.Duration, 0, len(ids))
	for _, id := range ids {
		est, ok := ests[id]
		switch {
		case !ok:
			ds = append(ds, 0)
		case !est.Known:
			ds = append(ds, horizon)
		default:
			ds = append(ds, max(0, est.Earliest.Add(est.Latest.Sub(est.Earliest)/2).Sub(w.now)))
		}
	}
	slices.Sort(ds)
	return rank(ds, 0.95)
}

// verdict is the capacity sentence for team ("" for the cluster) over a
// period's samples; of says what the period is ("yesterday", "this
// week").
func (e *Engine) verdict(ctx context.Context, now time.Time, samples []records.Sample, team, of string) string {
	b := bound(samples)
	var head string
	switch reason, share := b.top(); {
	case b.samples == 0:
		head = fmt.Sprintf("The queue was not sampled %s, so what it waited for is not known.", of)
	case b.waiting == 0 && b.samples == 1:
		head = fmt.Sprintf("Nothing waited for GPUs in the one sample %s.", of)
	case b.waiting == 0:
		head = fmt.Sprintf("Nothing waited for GPUs in any of the %d samples %s.", b.samples, of)
	default:
		head = fmt.Sprintf("Work waited in %s of the samples %s; the queue was %s-bound %s of that time.",
			pct(float64(b.waiting)/float64(b.samples)), of, reason, pct(share))
	}
	w, err := e.whatIfs(ctx, now)
	if err != nil {
		e.log.Error("computing the capacity what-ifs", "err", err)
		return head + " The what-ifs could not be computed (the operator's log says why)."
	}
	return head + " " + w.sentence(e, team)
}

// sentence says what the best hardware change and the best borrowing
// change would do to the p95 wait of the work of team waiting now.
func (w *whatIfs) sentence(e *Engine, team string) string {
	high := highPriorities(e.set)
	var ids, highIDs []string
	for id, wl := range w.pending {
		if team != "" && wl.Queue != team {
			continue
		}
		ids = append(ids, id)
		if high[e.priorityName(wl.Priority)] {
			highIDs = append(highIDs, id)
		}
	}
	slices.Sort(ids)
	slices.Sort(highIDs)
	what := ""
	if len(highIDs) > 0 {
		ids, what = highIDs, "high-priority "
	}
	if len(ids) == 0 {
		if team != "" {
			return fmt.Sprintf("Nothing of %s waits now, so no what-if applies.", team)
		}
		return "Nothing waits now, so no what-if applies."
	}
	base := w.p95(ids, w.before, e.horizon)
	var hw, pol *change
	var hwP95, polP95 time.Duration
	for i := range w.changes {
		c := &w.changes[i]
		p := w.p95(ids, c.after, e.horizon)
		if c.hardware && (hw == nil || p < hwP95) {
			hw, hwP95 = c, p
		}
		if !c.hardware && (pol == nil || p < polP95) {
			pol, polP95 = c, p
		}
	}
	helps := func(p time.Duration) bool { return p < base-time.Minute && float64(p) < 0.9*float64(base) }
	s := fmt.Sprintf("For the %s, %s now is %s", plural(len(ids), what+"request waiting", what+"requests waiting"), p95Word(len(ids)), fmtDur(base))
	switch {
	case hw != nil && helps(hwP95):
		s += fmt.Sprintf("; %s would take it to %s", hw.label, fmtDur(hwP95))
	case hw != nil:
		s += "; more GPUs would not shorten it (they wait for quota or their turn, not hardware)"
	}
	switch {
	case pol != nil && helps(polP95) && hw != nil && helps(hwP95) && polP95 <= hwP95+max(5*time.Minute, hwP95/10):
		s += fmt.Sprintf("; %s would do as much (%s)", pol.label, fmtDur(polP95))
	case pol != nil && helps(polP95):
		s += fmt.Sprintf("; %s would take it to %s", pol.label, fmtDur(polP95))
	}
	return s + "."
}

// p95Word names the statistic: with one request, p95 is its wait.
func p95Word(n int) string {
	if n == 1 {
		return "its estimated wait"
	}
	return "the p95 of their estimated waits"
}

// priorityName is the name of the priority with value v.
func (e *Engine) priorityName(v int32) string {
	for _, p := range e.set.Priorities {
		if p.Value == v {
			return p.Name
		}
	}
	return fmt.Sprint(v)
}

func pct(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) }

func fmtDur(d time.Duration) string { return commands.FormatDuration(d) }
