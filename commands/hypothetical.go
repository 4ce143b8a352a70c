package commands

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/records"
)

// A what-if is a read. Once the refresher has published estimates, it is
// simulated against the snapshot those estimates were made of (so that
// its answer agrees with /gpu queue's), and identical what-ifs against
// one generation of estimates share one simulation: hypotheticals keeps
// each outcome by (generation, hypothetical workload), and an asker who
// comes while the same simulation runs waits for it instead of running
// another. A newer generation empties the cache. What the answer says to
// whom (whether the asker may approve it, the victims' owners, the
// approximation note, times from now) is worked out for each asker from
// the shared outcome. Before the first refresh, or when the latest
// estimates are older than hypoFresh (a quiet cluster is re-estimated
// only every refreshEvery, and a simulation from then would start from
// then), a what-if is simulated on its own against the latest view,
// unshared.

// hypoKey is everything about a hypothetical request that its
// simulation depends on: the workload gpubot would submit for it.
type hypoKey struct {
	team, priority, flavor, topology, template string
	gpus                                       int
	duration                                   time.Duration
}

func hypoKeyOf(r records.Request) hypoKey {
	return hypoKey{team: r.Team, priority: r.Priority, flavor: r.Flavor, topology: r.Topology, template: r.Template, gpus: r.GPUs, duration: r.Duration}
}

// hypoOutcome is what simulating a hypothetical request found, the same
// for every asker. Its slices are shared: read, never modified.
type hypoOutcome struct {
	never    string // why it could never start, or ""
	err      error  // adding it to the snapshot failed
	admitted bool   // it would start at once
	flavor   string
	nodes    []string
	victims  []string // preempted to admit it at once
	est      allocator.Estimate
	why      string   // explain's sentence for est.Reason
	proposed []string // whom an admin could preempt to start it now
	needs    []string // why it needs approval
}

// hypotheticals is the what-ifs' cache for the latest generation of
// estimates.
type hypotheticals struct {
	mu   sync.Mutex
	gen  uint64
	m    map[hypoKey]*hypoEntry
	sims atomic.Uint64 // simulations run, for tests
}

// hypoEntry is one outcome, done once its simulation ends; ok is false
// if the simulation panicked (its waiters then simulate themselves).
type hypoEntry struct {
	done chan struct{}
	out  hypoOutcome
	ok   bool
}

// hypoFresh is how old the latest estimates may be for what-ifs to share
// their snapshot: under load the refresher publishes about every second.
const hypoFresh = 5 * time.Second

// maxHypotheticals bounds the cache: distinct what-ifs beyond it within
// one generation are simulated without being kept.
const maxHypotheticals = 256

// drop empties the cache if gen is newer than its outcomes.
func (h *hypotheticals) drop(gen uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if gen > h.gen {
		h.gen, h.m = gen, nil
	}
}

// get returns the outcome of k against generation gen, running sim only
// if nobody has or is running it.
func (h *hypotheticals) get(gen uint64, k hypoKey, sim func() hypoOutcome) hypoOutcome {
	run := func() hypoOutcome { h.sims.Add(1); return sim() }
	h.mu.Lock()
	if gen > h.gen {
		h.gen, h.m = gen, nil
	}
	if gen != h.gen {
		h.mu.Unlock()
		return run() // an older generation than the cache's
	}
	if e, ok := h.m[k]; ok {
		h.mu.Unlock()
		<-e.done
		if e.ok {
			return e.out
		}
		return run()
	}
	if len(h.m) >= maxHypotheticals {
		h.mu.Unlock()
		return run()
	}
	if h.m == nil {
		h.m = map[hypoKey]*hypoEntry{}
	}
	e := &hypoEntry{done: make(chan struct{})}
	h.m[k] = e
	h.mu.Unlock()
	defer func() {
		if !e.ok {
			h.mu.Lock()
			if h.m[k] == e {
				delete(h.m, k)
			}
			h.mu.Unlock()
		}
		close(e.done)
	}()
	e.out = run()
	e.ok = true
	return e.out
}

// hypothetical simulates r, a validated draft, as if submitted now: on
// the latest estimates' snapshot, shared with identical what-ifs, or,
// before the first refresh, on c's snapshot alone.
func (s *Service) hypothetical(c *call, r records.Request) (hypoOutcome, error) {
	v := s.view()
	if v.gen == 0 || v.estSnap == nil || c.now.Sub(v.estAt) > hypoFresh {
		snap, err := s.snapshot(c)
		if err != nil {
			return hypoOutcome{}, err
		}
		s.hypos.sims.Add(1)
		return s.simulateHypothetical(c, snap, s.clone(snap), r, s.viewOptions(c)), nil
	}
	return s.hypos.get(v.gen, hypoKeyOf(r), func() hypoOutcome {
		// The view's snapshot is shared: only a copy is worked on, one
		// for both: the approval rules read it before r is added.
		sim := s.clone(v.estSnap)
		return s.simulateHypothetical(c, sim, sim, r, v.opts)
	}), nil
}

// simulateHypothetical works out r's outcome: snap is the cluster as it
// is (for the approval rules), sim a copy of it to add r to; they may be
// one snapshot, which is then as it is until the rules are worked out
// (they come first, and only fill caches).
func (s *Service) simulateHypothetical(c *call, snap, sim *allocator.Snapshot, r records.Request, opts allocator.EstimateOptions) hypoOutcome {
	var out hypoOutcome
	if out.never = s.never(c, snap, r, false); out.never != "" {
		return out
	}
	out.needs = s.approvalNeeds(snap, r)
	r.ID = "whatif"
	r.SubmittedAt = c.now // after everything queued: as it would be
	if _, err := sim.Add(s.workload(r)); err != nil {
		out.err = err
		return out
	}
	events := sim.Schedule()
	for _, ev := range events {
		if ev.ID == r.ID && ev.Kind == allocator.EventAdmitted {
			out.admitted = true
			out.flavor, out.nodes = ev.Admission.Flavor, ev.Admission.Nodes
		}
	}
	if out.admitted {
		out.victims = victimsOf(events, r.ID)
		return out
	}
	out.est = allocator.EstimateFor(sim, r.ID, opts)
	out.why = s.explain(sim, r, out.est.Reason)
	if w, ok := sim.Workload(r.ID); ok {
		if victims, _, ok := sim.ProposeVictims(w); ok && len(victims) > 0 {
			out.proposed = victims
		}
	}
	return out
}
