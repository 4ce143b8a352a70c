// Package simcluster is gpubot's simulated Kubernetes + Kueue cluster: an
// in-memory cluster driven by the allocator and a clock, persisted after
// every change. It is the embedded default (no cluster needed) and the
// engine the trace simulator replays through.
//
// # Basics
//
// The cluster's state is an allocator.Snapshot. Submitting a workload runs
// a scheduling cycle at once, as Kueue does when a workload arrives;
// Advance moves simulated time, finishing workloads that reach their
// requested duration and admitting what then fits. Every operation first
// catches up to the clock's time, so events come out in time order.
//
// # Caveats
//
// Workloads run exactly their requested duration unless removed earlier:
// the simulated cluster has no notion of a job failing or finishing early
// on its own. Changes are saved through StateStore after each operation;
// if saving fails the operation is undone and the error returned.
package simcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
)

// StateName is the name under which the state is saved.
const StateName = "simcluster"

// StateStore keeps the cluster's state between runs.
type StateStore interface {
	GetState(ctx context.Context, name string) ([]byte, error)
	PutState(ctx context.Context, name string, data []byte) error
}

// Clock tells the simulated time.
type Clock interface {
	Now() time.Time
}

// state is what is saved.
type state struct {
	Version   int                  `json:"version"`
	Now       time.Time            `json:"now"`
	Workloads []allocator.Workload `json:"workloads"`
	Usage     map[string]float64   `json:"usage"`
}

const stateVersion = 1

// Cluster is the simulated cluster.
type Cluster struct {
	clock    Clock
	st       StateStore
	notFound func(error) bool

	mu   sync.Mutex
	snap *allocator.Snapshot
}

// New loads the saved state, or starts an empty cluster at the clock's
// time. isNotFound tells a missing state from a failure to read it. The
// saved workloads are checked against c: a config change that leaves
// them without a node or queue is reported, not ignored.
func New(ctx context.Context, c *allocator.Cluster, st StateStore, clock Clock, isNotFound func(error) bool) (*Cluster, bool, error) {
	cl := &Cluster{clock: clock, st: st, notFound: isNotFound}
	data, err := st.GetState(ctx, StateName)
	switch {
	case err != nil && isNotFound(err):
		snap, err := allocator.NewSnapshot(c, clock.Now(), nil, nil)
		if err != nil {
			return nil, false, fmt.Errorf("building the simulated cluster: %w", err)
		}
		cl.snap = snap
		return cl, true, cl.save(ctx, snap)
	case err != nil:
		return nil, false, fmt.Errorf("loading the simulated cluster: %w", err)
	}
	var s state
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, false, fmt.Errorf("decoding the simulated cluster's saved state: %w", err)
	}
	if s.Version != stateVersion {
		return nil, false, fmt.Errorf("the simulated cluster's saved state has version %d; this gpubot reads version %d", s.Version, stateVersion)
	}
	snap, err := allocator.NewSnapshot(c, s.Now, s.Workloads, s.Usage)
	if err != nil {
		return nil, false, fmt.Errorf("the saved simulated cluster no longer matches the configuration (%w); move the data directory aside to start afresh", err)
	}
	cl.snap = snap
	return cl, false, nil
}

// Snapshot returns a copy of the current state.
func (c *Cluster) Snapshot(ctx context.Context) (*allocator.Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snap.Clone(), nil
}

// Now is the simulated cluster's own time: the last time it caught up to.
func (c *Cluster) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snap.Now()
}

// NextEvent is when the next running workload ends, or the zero time.
func (c *Cluster) NextEvent() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	var next time.Time
	for _, w := range c.snap.Workloads() {
		if w.Admission == nil || w.Duration == 0 {
			continue
		}
		end := w.Admission.At.Add(w.Duration)
		if next.IsZero() || end.Before(next) {
			next = end
		}
	}
	return next
}

// Advance moves the cluster to the clock's time.
func (c *Cluster) Advance(ctx context.Context) ([]allocator.Event, error) {
	return c.change(ctx, func(*allocator.Snapshot) ([]allocator.Event, error) { return nil, nil })
}

// Apply carries out op at the clock's time.
func (c *Cluster) Apply(ctx context.Context, op commands.Op) ([]allocator.Event, error) {
	return c.change(ctx, func(s *allocator.Snapshot) ([]allocator.Event, error) {
		switch op.Kind {
		case commands.OpSubmit:
			return submit(s, op.Workload)
		case commands.OpRemove:
			if _, ok := s.Workload(op.ID); !ok {
				return nil, nil // already gone: removing twice is harmless
			}
			if _, err := s.Release(op.ID); err != nil {
				return nil, err
			}
			return s.Schedule(), nil
		case commands.OpExtend:
			if _, err := s.Extend(op.ID, op.Duration); err != nil {
				return nil, err
			}
			return nil, nil
		case commands.OpPreempt:
			if w, ok := s.Workload(op.ID); ok && w.Admission != nil {
				return nil, nil // already running
			}
			evs, err := s.Preempt(op.ID, op.Victims)
			if err != nil {
				return nil, err
			}
			return append(evs, s.Schedule()...), nil
		}
		return nil, fmt.Errorf("simulated cluster: unknown operation %q", op.Kind)
	})
}

// submit adds w. A workload with an Admission but no nodes is work that
// was already running (a seed): it is placed now and admitted as of its
// Admission time.
func submit(s *allocator.Snapshot, w allocator.Workload) ([]allocator.Event, error) {
	if _, ok := s.Workload(w.ID); ok {
		return nil, nil // submitting twice is harmless
	}
	if w.Admission != nil && len(w.Admission.Nodes) == 0 {
		at := w.Admission.At
		w.Admission = nil
		if _, err := s.Add(w); err != nil {
			return nil, err
		}
		a, reason := s.Fit(w)
		if reason != allocator.ReasonNone {
			return nil, fmt.Errorf("running workload %s does not fit in the simulated cluster (%s)", w.ID, reason)
		}
		a.At = at
		if _, err := s.Reserve(w.ID, a); err != nil {
			return nil, err
		}
		return []allocator.Event{{Kind: allocator.EventAdmitted, ID: w.ID, At: at, Admission: &a}}, nil
	}
	if _, err := s.Add(w); err != nil {
		return nil, err
	}
	return s.Schedule(), nil
}

// change catches up to the clock, applies fn on a copy, saves it, and
// only then makes it current.
func (c *Cluster) change(ctx context.Context, fn func(*allocator.Snapshot) ([]allocator.Event, error)) ([]allocator.Event, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := c.snap.Clone()
	events := next.Advance(c.clock.Now(), nil)
	more, err := fn(next)
	if err != nil {
		return nil, err
	}
	events = append(events, more...)
	if err := c.save(ctx, next); err != nil {
		return nil, err
	}
	c.snap = next
	return events, nil
}

func (c *Cluster) save(ctx context.Context, s *allocator.Snapshot) error {
	data, err := json.Marshal(state{Version: stateVersion, Now: s.Now(), Workloads: s.Workloads(), Usage: s.Usage()})
	if err != nil {
		return fmt.Errorf("encoding the simulated cluster: %w", err)
	}
	if err := c.st.PutState(ctx, StateName, data); err != nil {
		return fmt.Errorf("saving the simulated cluster: %w", err)
	}
	return nil
}
