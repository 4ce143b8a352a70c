package simcluster

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// Elastic capacity in the simulated cluster, as Kueue's ProvisioningRequest
// admission check and a cluster autoscaler would do it, on the clock.
//
// A provisioned flavor's work is admitted by the allocator like any other
// (its quota reserved and the nodes it will get chosen among the flavor's
// nodes, the most the pool provisions), but that is a quota reservation,
// not an admission: its check is Pending and nothing is reported until
// the attempt's Provisioning time has passed. Then the attempt either
// succeeds (the check is Ready and the work is admitted, as of then) or
// fails, as ElasticFlavor's FailAttempts and FailureRate say: the quota
// is given back (the work leaves the allocator), the check is Retry and
// the work is queued again after Kueue's back-off (Retry's Backoff doubling
// up to MaxBackoff), for a new attempt; when Retry's Limit is spent the check is
// Rejected and the work stays out, holding nothing, until it is switched
// or removed. A spot flavor's nodes are reclaimed from work that has run
// ReclaimAfter on them: the work is evicted and requeued (EventPreempted
// with no By and a Detail), as Kueue does when a spot node goes away.
// All of it happens in time order with everything else.

// ElasticFlavor is how the simulated cluster treats one elastic flavor.
type ElasticFlavor struct {
	// Check names the provisioned flavor's admission check ("" for spot).
	Check string
	// Provisioning: a provisioning attempt ends this long after the
	// quota is reserved (its nodes come, or it fails). Zero with a
	// Check: at once.
	Provisioning time.Duration
	// Retry is the ProvisioningRequestConfig's retry strategy. The zero
	// value is Kueue's default (commands.DefaultProvisioningRetry).
	Retry commands.ProvisioningRetry
	// FailAttempts: the first this many attempts of each workload fail.
	FailAttempts int
	// FailureRate: each later attempt fails with this probability (0–1),
	// drawn from Seed, the workload and the attempt, so that a run is
	// repeatable and a restart does not change the outcome.
	FailureRate float64
	Seed        int64
	// ReclaimAfter: a spot flavor's nodes are reclaimed from work that has
	// run this long (0: never).
	ReclaimAfter time.Duration
}

func (f ElasticFlavor) retry() commands.ProvisioningRetry {
	if f.Retry == (commands.ProvisioningRetry{}) {
		return commands.DefaultProvisioningRetry
	}
	return f.Retry
}

// fails reports whether attempt n of workload id fails.
func (f ElasticFlavor) fails(id string, n int) bool {
	if n <= f.FailAttempts {
		return true
	}
	if f.FailureRate <= 0 {
		return false
	}
	h := fnv.New64a()
	fmt.Fprintf(h, "%d/%s/%d", f.Seed, id, n)
	return float64(h.Sum64()>>11)/float64(1<<53) < f.FailureRate
}

// WithElastic gives the cluster its elastic flavors, by name. Default:
// none (every flavor is reserved).
func WithElastic(fs map[string]ElasticFlavor) Option {
	return func(c *Cluster) { c.elastic = fs }
}

// held is provisioned work out of the allocator, holding no quota: after a
// failed attempt until Until (Kueue's back-off), or, with a zero Until,
// for good (its check was Rejected).
type held struct {
	Workload allocator.Workload `json:"workload"`
	Until    time.Time          `json:"until,omitzero"`
	// Ready is a saved state's older form: work waiting outside the
	// allocator for its nodes until Ready. It is queued again then.
	Ready time.Time `json:"ready,omitzero"`
}

// check is a provisioned workload's admission check.
type check struct {
	// State is Kueue's (commands.CheckPending, …), or "" while the work
	// waits for quota after a failed attempt.
	State string    `json:"state"`
	Since time.Time `json:"since"`
	// Attempt is the current (or last) attempt, from 1.
	Attempt int `json:"attempt"`
	// Due is when a Pending attempt ends; Fails says how.
	Due   time.Time `json:"due,omitzero"`
	Fails bool      `json:"fails,omitempty"`
	// Message is the check's, as Kueue words it.
	Message string                  `json:"message,omitempty"`
	Failed  []commands.CheckFailure `json:"failed,omitempty"`
}

// provisioned is a saved state's older record of provisioned work.
type provisioned struct {
	Asked time.Time `json:"asked"`
	Ready time.Time `json:"ready"`
}

// elasticState is the elastic part of the saved state.
type elasticState struct {
	Held   []held           `json:"held,omitempty"`
	Checks map[string]check `json:"checks,omitempty"`
	// Provisioned is read from older saved states only.
	Provisioned map[string]provisioned `json:"provisioned,omitempty"`
}

func (e elasticState) clone() elasticState {
	out := elasticState{Held: slices.Clone(e.Held), Checks: maps.Clone(e.Checks)}
	if out.Checks == nil {
		out.Checks = map[string]check{}
	}
	for id, ch := range out.Checks {
		ch.Failed = slices.Clone(ch.Failed)
		out.Checks[id] = ch
	}
	return out
}

// upgrade turns an older saved state's records into checks: provisioned
// work is Ready since its admission; held work is queued again at Ready.
func (e *elasticState) upgrade(s *allocator.Snapshot) {
	for id := range e.Provisioned {
		if w, ok := s.Workload(id); ok && w.Admission != nil {
			e.Checks[id] = check{State: commands.CheckReady, Since: w.Admission.At, Attempt: 1}
		}
	}
	e.Provisioned = nil
	for i, h := range e.Held {
		if h.Until.IsZero() && !h.Ready.IsZero() {
			e.Held[i].Until, e.Held[i].Ready = h.Ready, time.Time{}
		}
	}
}

func (e *elasticState) holding(id string) int {
	return slices.IndexFunc(e.Held, func(h held) bool { return h.Workload.ID == id })
}

// forget drops id's held work and check, reporting whether it was held.
func forget(e *elasticState, id string) bool {
	delete(e.Checks, id)
	if i := e.holding(id); i >= 0 {
		e.Held = slices.Delete(e.Held, i, i+1)
		return true
	}
	return false
}

// checkOf is the provisioned flavor of w's admission, if it has one.
func (c *Cluster) checkOf(w allocator.Workload) (ElasticFlavor, bool) {
	if w.Admission == nil {
		return ElasticFlavor{}, false
	}
	f, ok := c.elastic[w.Admission.Flavor]
	return f, ok && f.Check != ""
}

// reserving reports whether admitted w only holds quota: it is on a
// provisioned flavor and its check has not been Ready since its admission.
func (c *Cluster) reserving(e *elasticState, w allocator.Workload) bool {
	if _, ok := c.checkOf(w); !ok {
		return false
	}
	ch := e.Checks[w.ID]
	return !(ch.State == commands.CheckReady && ch.Since.Equal(w.Admission.At))
}

// endOf is the allocator's end function: work that only holds quota does
// not run, so it does not end.
func (c *Cluster) endOf(e *elasticState) func(allocator.Workload) time.Time {
	return func(w allocator.Workload) time.Time {
		if w.Duration <= 0 || c.reserving(e, w) {
			return time.Time{}
		}
		return w.Admission.At.Add(w.Duration)
	}
}

// reclaimAt is when admitted spot workload w loses its nodes.
func (c *Cluster) reclaimAt(w allocator.Workload) (time.Time, bool) {
	if w.Admission == nil {
		return time.Time{}, false
	}
	f, ok := c.elastic[w.Admission.Flavor]
	if !ok || f.ReclaimAfter <= 0 {
		return time.Time{}, false
	}
	t := w.Admission.At.Add(f.ReclaimAfter)
	if w.Duration > 0 && !t.Before(w.Admission.At.Add(w.Duration)) {
		return time.Time{}, false // it ends first
	}
	return t, true
}

// ProvisioningChecks implements commands.Provisioning: the check of each
// provisioned workload, as Kueue reports it (see the package's elastic
// notes). Work waiting for quota again after a failed attempt keeps its
// Retry until the next attempt starts.
func (c *Cluster) ProvisioningChecks(context.Context) (map[string]commands.CheckState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]commands.CheckState{}
	for id, ch := range c.el.Checks {
		w, in := c.snap.Workload(id)
		if !in && c.el.holding(id) < 0 {
			continue
		}
		flavor := w.Flavor
		if in && w.Admission != nil {
			flavor = w.Admission.Flavor
		} else if i := c.el.holding(id); i >= 0 {
			flavor = c.el.Held[i].Workload.Flavor
		}
		f := c.elastic[flavor]
		st := commands.CheckState{Check: f.Check, State: ch.State, Attempt: ch.Attempt, Since: ch.Since, Message: ch.Message,
			Failed: slices.Clone(ch.Failed)}
		switch ch.State {
		case "":
			if len(ch.Failed) == 0 {
				continue
			}
			last := ch.Failed[len(ch.Failed)-1]
			st.State, st.Attempt, st.Message = commands.CheckRetry, last.Attempt, "Retrying after failure: "+last.Message
		case commands.CheckPending:
			st.Nodes = c.pods(w)
		}
		out[id] = st
	}
	return out, nil
}

// pods is how many pods (so nodes) w's admission has.
func (c *Cluster) pods(w allocator.Workload) int {
	if w.Admission != nil && len(w.Admission.Nodes) > 0 {
		return len(w.Admission.Nodes)
	}
	for _, fl := range c.snap.Cluster().Flavors {
		if w.Admission != nil && fl.Name == w.Admission.Flavor {
			p, _, _ := allocator.PodShape(w.GPUs, fl.GPUsPerNode)
			return p
		}
	}
	return 1
}

// withHeld is a copy of s with the held work added as pending, so that
// callers see every workload the cluster has.
func withHeld(s *allocator.Snapshot, e elasticState) *allocator.Snapshot {
	out := s.Clone()
	for _, h := range e.Held {
		_, _ = out.Add(h.Workload)
	}
	return out
}
