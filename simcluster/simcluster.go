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
// if saving fails the operation is undone and the error returned. With
// WithSavesByCaller the cluster's owner saves instead: the command
// service commits the state (Unsaved) in the same transaction as its
// records of the change, so that a crash cannot keep one without the
// other, and drops a change whose commit failed (Discard). Saved that
// way the state is kept per workload (one named state each, and one for
// the rest), so that a change writes what it changed, not the whole
// cluster, and finds what it changed from the workloads its mutations
// marked, without looking at the others; a store holding the older single blob is loaded and converted
// at the first save (persist.go).
//
// # Simulated use of the GPUs
//
// So that the zombie sweep has something to find without a real cluster,
// a workload may be given a Profile (SetProfile; the configuration's
// simulation.running entries do it for seeded work): its GPUs' simulated
// utilization, which GPUUtilization reports as a real cluster's DCGM
// metrics would be, and pods that never become ready, which the cluster
// reports (EventPodsNotReady) once the pods-ready timeout after the
// admission has passed, as the Kubernetes bridge does. Work without a
// profile is busy (BusyUtilization) and its pods are ready; no
// EventPodsReady is reported for it.
package simcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/gpubot/gpubot/allocator"
	"github.com/gpubot/gpubot/commands"
	"github.com/gpubot/gpubot/records"
)

// StateName is the name under which the state is saved.
const StateName = "simcluster"

// StateStore keeps the cluster's state between runs. GetState's error
// wraps records.ErrNotFound when nothing was saved yet (a new cluster);
// any other error is a failure to read it.
type StateStore interface {
	GetState(ctx context.Context, name string) ([]byte, error)
	PutState(ctx context.Context, name string, data []byte) error
}

// state is what is saved.
type state struct {
	Version   int                  `json:"version"`
	Now       time.Time            `json:"now"`
	Workloads []allocator.Workload `json:"workloads"`
	Usage     map[string]float64   `json:"usage"`
	// Profiles are the simulated use of workloads that have one.
	Profiles map[string]Profile `json:"profiles,omitempty"`
	// Elastic is the held provisioned work and what was provisioned.
	Elastic elasticState `json:"elastic,omitempty"`
}

// Profile is how a simulated workload uses its GPUs. The zero value is
// busy work whose pods are ready at once.
type Profile struct {
	// GPUUtilization is its busiest GPU's utilization in percent; nil
	// means busy (BusyUtilization).
	GPUUtilization *float64 `json:"gpuUtilization,omitempty"`
	// PodsNeverReady: its pods never become ready.
	PodsNeverReady bool `json:"podsNeverReady,omitempty"`
	// PodsToldFor is the admission whose pods were reported not ready.
	PodsToldFor time.Time `json:"podsToldFor,omitempty"`
}

// BusyUtilization is the simulated utilization of work without a profile.
const BusyUtilization = 87.0

// DefaultPodsReadyTimeout is how long after admission pods that never
// become ready are reported, unless WithPodsReadyTimeout says otherwise.
const DefaultPodsReadyTimeout = 10 * time.Minute

// Option configures a Cluster.
type Option func(*Cluster)

// WithPodsReadyTimeout sets how long after admission pods that never
// become ready are reported not ready. Default DefaultPodsReadyTimeout.
func WithPodsReadyTimeout(d time.Duration) Option {
	return func(c *Cluster) {
		if d > 0 {
			c.podsTimeout = d
		}
	}
}

// WithSavesByCaller leaves saving to the cluster's owner: a change is
// kept in memory until Unsaved hands it out and Saved says it is
// durable. Default: each change is saved through the StateStore.
func WithSavesByCaller() Option { return func(c *Cluster) { c.callerSaves = true } }

const stateVersion = 1

// Cluster is the simulated cluster.
type Cluster struct {
	clock       clock.PassiveClock
	st          StateStore
	podsTimeout time.Duration
	callerSaves bool

	elastic map[string]ElasticFlavor

	mu       sync.Mutex
	snap     *allocator.Snapshot
	profiles map[string]Profile
	dirty    bool // changed since the owner last saved it (WithSavesByCaller)
	base     baseline
	touched  map[string]uint64 // workloads changed since saved, by the number of their last change
	gen      uint64            // the changes made, numbered (WithSavesByCaller)
	pending  *unsaved          // what the last Unsaved returned, made the baseline by Saved
	c        *allocator.Cluster
	el       elasticState
	// held is the current state with the held work added (withHeld),
	// made for SharedSnapshot once per current snap (heldOf) and handed
	// out like snap itself: snap and el are only ever replaced, together,
	// never changed, so it stays right until snap is replaced.
	held, heldOf *allocator.Snapshot
}

// New loads the saved state, or starts an empty cluster at the clock's
// time when none was saved (records.ErrNotFound). The saved workloads are
// checked against c: a config change that leaves them without a node or
// queue is reported, not ignored.
func New(ctx context.Context, c *allocator.Cluster, st StateStore, clk clock.PassiveClock, opts ...Option) (*Cluster, bool, error) {
	cl := &Cluster{clock: clk, st: st, podsTimeout: DefaultPodsReadyTimeout, profiles: map[string]Profile{}, c: c,
		el: elasticState{Checks: map[string]check{}}, base: baseline{ws: map[string]savedWorkload{}}, touched: map[string]uint64{}}
	for _, o := range opts {
		o(cl)
	}
	if _, ok := st.(KeyedStore); cl.callerSaves && !ok {
		return nil, false, errors.New("the simulated cluster's owner saves it, but its store cannot keep per-workload state")
	}
	found, err := cl.loadStored(ctx)
	if err != nil {
		return nil, false, err
	}
	if found {
		return cl, false, nil
	}
	snap, err := allocator.NewSnapshot(c, clk.Now(), nil, nil)
	if err != nil {
		return nil, false, fmt.Errorf("building the simulated cluster: %w", err)
	}
	cl.snap = snap
	if cl.callerSaves {
		return cl, true, cl.saveKeyed(ctx)
	}
	return cl, true, cl.save(ctx, snap, cl.profiles, cl.el)
}

// load makes the saved state data current. The caller holds c.mu or has
// the only reference to c.
func (c *Cluster) load(data []byte) error {
	var s state
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("decoding the simulated cluster's saved state: %w", err)
	}
	if s.Version != stateVersion {
		return fmt.Errorf("the simulated cluster's saved state has version %d; this gpubot reads version %d", s.Version, stateVersion)
	}
	snap, err := allocator.NewSnapshot(c.c, s.Now, s.Workloads, s.Usage)
	if err != nil {
		return fmt.Errorf("the saved simulated cluster no longer matches the configuration (%w); move the data directory aside to start afresh", err)
	}
	c.snap = snap
	c.profiles = map[string]Profile{}
	for id, p := range s.Profiles {
		c.profiles[id] = p
	}
	c.el = s.Elastic.clone()
	c.el.upgrade(snap)
	return nil
}

// Unsaved returns the named states to save, if the cluster changed
// since the last Saved (WithSavesByCaller; never otherwise): the
// workloads the changes since touched that differ from what the store
// holds (nil Data for those that went), and the rest of the state if it
// changed, as the package doc of persist.go describes. Its cost is that
// of what changed, not of the whole cluster.
func (c *Cluster) Unsaved() ([]records.NamedState, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return nil, false, nil
	}
	states, u, err := c.delta()
	if err != nil {
		return nil, false, err
	}
	if len(states) == 0 { // changed and changed back: the store holds it
		c.settle(u)
		return nil, false, nil
	}
	c.pending = u
	return states, true, nil
}

// Saved tells the cluster that the states Unsaved last returned are
// durable. Changes made after that Unsaved stay unsaved.
func (c *Cluster) Saved() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending != nil {
		c.settle(c.pending)
	}
}

// Discard drops the changes not saved: the cluster goes back to its
// state as last saved in the StateStore (after a failed commit).
func (c *Cluster) Discard(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return nil
	}
	c.dirty, c.pending = false, nil
	found, err := c.loadStored(ctx)
	if err != nil {
		c.dirty = true
		return fmt.Errorf("reloading the simulated cluster: %w", err)
	}
	if !found {
		c.dirty = true
		return fmt.Errorf("reloading the simulated cluster: %w", records.ErrNotFound)
	}
	return nil
}

// Snapshot returns a copy of the current state.
func (c *Cluster) Snapshot(ctx context.Context) (*allocator.Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return withHeld(c.snap, c.el), nil
}

// SharedSnapshot returns the current state without copying it (with
// provisioned work held, a copy that adds it, made once for each current
// state): the cluster never changes a state once it is current, since a
// change works on a copy and then replaces it (change), so the snapshot
// stays as it was handed out. The
// caller must not change it either, nor call on it the allocator's
// methods that fill caches in the snapshot they run on (Fit, Diagnose,
// ProposeVictims, ...): it clones it for those. Cloning it and reading
// its state (Now, Workloads, Cluster) is safe from any goroutine.
func (c *Cluster) SharedSnapshot(ctx context.Context) (*allocator.Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.el.Held) == 0 {
		return c.snap, nil
	}
	if c.heldOf != c.snap {
		c.held, c.heldOf = withHeld(c.snap, c.el), c.snap
	}
	return c.held, nil
}

// Now is the simulated cluster's own time: the last time it caught up to.
func (c *Cluster) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snap.Now()
}

// NextEvent is when the next running workload ends (or its pods are
// reported not ready), or the zero time.
func (c *Cluster) NextEvent() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	next, _ := c.dueElastic(c.snap, &c.el, c.snap.Now().Add(100*365*24*time.Hour))
	endOf := c.endOf(&c.el)
	for _, w := range c.snap.Workloads() {
		if w.Admission == nil {
			continue
		}
		if t, ok := c.podsDue(w); ok && (next.IsZero() || t.Before(next)) {
			next = t
		}
		end := endOf(w)
		if end.IsZero() {
			continue
		}
		if next.IsZero() || end.Before(next) {
			next = end
		}
	}
	return next
}

// podsDue returns when the pods of admitted workload w are to be reported
// not ready, if they are and that has not been done. The caller holds c.mu.
func (c *Cluster) podsDue(w allocator.Workload) (time.Time, bool) {
	p, ok := c.profiles[w.ID]
	if !ok || !p.PodsNeverReady || w.Admission == nil || p.PodsToldFor.Equal(w.Admission.At) {
		return time.Time{}, false
	}
	return w.Admission.At.Add(c.podsTimeout), true
}

// SetProfile gives workload id, which the cluster must have, a
// simulated use of its GPUs (see the package doc), saved with the
// cluster. The profile goes when the workload does.
func (c *Cluster) SetProfile(ctx context.Context, id string, p Profile) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.snap.Workload(id); !ok {
		return fmt.Errorf("simulated cluster: no workload %s to give a profile", id)
	}
	profiles := maps.Clone(c.profiles)
	profiles[id] = p
	if c.callerSaves {
		old := c.profiles
		c.profiles = profiles
		c.touch(map[string]struct{}{id: {}})
		if err := c.saveKeyed(ctx); err != nil { // with any unsaved change, as below
			c.profiles = old
			return err
		}
		return nil
	}
	if err := c.save(ctx, c.snap, profiles, c.el); err != nil {
		return err
	}
	c.profiles, c.dirty = profiles, false // the whole state was saved
	return nil
}

// GPUUtilization implements commands.Utilization with the profiles: the
// simulated utilization of each admitted workload among ids, over the
// part of the window it has been admitted (Coverage says how much).
func (c *Cluster) GPUUtilization(_ context.Context, ids []string, window time.Duration, now time.Time) (map[string]commands.Utilized, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]commands.Utilized{}
	for _, id := range ids {
		w, ok := c.snap.Workload(id)
		if !ok || w.Admission == nil || window <= 0 || c.reserving(&c.el, w) {
			continue // not running (or only holding quota while its nodes are provisioned)
		}
		u := commands.Utilized{Peak: BusyUtilization, Coverage: 1, Source: "simulated"}
		if p := c.profiles[id]; p.PodsNeverReady {
			u.Peak = 0
		} else if p.GPUUtilization != nil {
			u.Peak = *p.GPUUtilization
		}
		if ran := now.Sub(w.Admission.At); ran < window {
			u.Coverage = max(0, float64(ran)/float64(window))
		}
		out[id] = u
	}
	return out, nil
}

// Advance moves the cluster to the clock's time.
func (c *Cluster) Advance(ctx context.Context) ([]allocator.Event, error) {
	return c.change(ctx, func(*tracked, *elasticState) ([]allocator.Event, error) { return nil, nil })
}

// Apply carries out op at the clock's time.
func (c *Cluster) Apply(ctx context.Context, op commands.Op) ([]allocator.Event, error) {
	return c.change(ctx, func(s *tracked, e *elasticState) ([]allocator.Event, error) {
		switch op.Kind {
		case commands.OpSubmit:
			if e.holding(op.Workload.ID) >= 0 {
				return nil, nil // submitting twice is harmless
			}
			evs, err := submit(s, op.Workload)
			return c.reserve(e, evs), err
		case commands.OpSwitch:
			forget(e, op.Workload.ID)
			var events []allocator.Event
			if _, ok := s.Workload(op.Workload.ID); ok {
				if _, err := s.Release(op.Workload.ID); err != nil {
					return nil, err
				}
				events = s.Schedule()
			}
			more, err := submit(s, op.Workload)
			if err != nil {
				return nil, err
			}
			return c.reserve(e, append(events, more...)), nil
		case commands.OpRemove:
			if forget(e, op.ID) {
				if _, ok := s.Workload(op.ID); !ok {
					return nil, nil
				}
			}
			if _, ok := s.Workload(op.ID); !ok {
				return nil, nil // already gone: removing twice is harmless
			}
			if _, err := s.Release(op.ID); err != nil {
				return nil, err
			}
			delete(e.Checks, op.ID)
			return c.reserve(e, s.Schedule()), nil
		case commands.OpExtend:
			if i := e.holding(op.ID); i >= 0 {
				e.Held[i].Workload.Duration = op.Duration
				return nil, nil
			}
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
			return c.reserve(e, append(evs, s.Schedule()...)), nil
		}
		return nil, fmt.Errorf("simulated cluster: unknown operation %q", op.Kind)
	})
}

// submit adds w. A workload with an Admission but no nodes is work that
// was already running (a seed): it is placed now and admitted as of its
// Admission time.
func submit(s *tracked, w allocator.Workload) ([]allocator.Event, error) {
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
// only then makes it current. With the owner saving, the workloads the
// change touched are marked for the next Unsaved. The state that was
// current is left as it was: SharedSnapshot may have handed it out.
func (c *Cluster) change(ctx context.Context, fn func(*tracked, *elasticState) ([]allocator.Event, error)) ([]allocator.Event, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	next := track(c.snap.Clone())
	el := c.el.clone()
	now := c.clock.Now()
	events := c.advance(next, &el, now)
	more, err := fn(next, &el)
	if err != nil {
		return nil, err
	}
	events = append(events, more...)
	profiles := maps.Clone(c.profiles)
	events = append(events, next.marked(podsEvents(next.Snapshot, profiles, now, c.podsTimeout))...)
	maps.DeleteFunc(profiles, func(id string, _ Profile) bool { _, ok := next.Workload(id); return !ok })
	maps.DeleteFunc(el.Checks, func(id string, _ check) bool { _, ok := next.Workload(id); return !ok && el.holding(id) < 0 })
	if c.callerSaves {
		c.touch(next.touched)
	} else if err := c.save(ctx, next.Snapshot, profiles, el); err != nil {
		return nil, err
	}
	c.snap, c.profiles, c.el = next.Snapshot, profiles, el
	return events, nil
}

// podsEvents reports the pods of admitted workloads that never become
// ready, once the timeout after their admission has passed by now, and
// marks them told in profiles.
func podsEvents(s *allocator.Snapshot, profiles map[string]Profile, now time.Time, timeout time.Duration) []allocator.Event {
	var out []allocator.Event
	ids := make([]string, 0, len(profiles))
	for id := range profiles {
		ids = append(ids, id)
	}
	slices.Sort(ids) // only workloads with a profile can have pods that never become ready
	for _, id := range ids {
		p := profiles[id]
		w, ok := s.Workload(id)
		if !ok || !p.PodsNeverReady || w.Admission == nil || p.PodsToldFor.Equal(w.Admission.At) {
			continue
		}
		at := w.Admission.At.Add(timeout)
		if at.After(now) {
			continue
		}
		pods := max(1, len(w.Admission.Nodes))
		p.PodsToldFor = w.Admission.At
		profiles[w.ID] = p
		out = append(out, allocator.Event{Kind: allocator.EventPodsNotReady, ID: w.ID, At: at, Pods: pods,
			Detail: fmt.Sprintf("0 of %d pods ready; pod gpubot-%s-0: ImagePullBackOff (simulated)", pods, w.ID)})
	}
	return out
}

func (c *Cluster) encode(s *allocator.Snapshot, profiles map[string]Profile, el elasticState) ([]byte, error) {
	st := state{Version: stateVersion, Now: s.Now(), Workloads: s.Workloads(), Usage: s.Usage(), Elastic: el}
	if len(profiles) > 0 {
		st.Profiles = profiles
	}
	data, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("encoding the simulated cluster: %w", err)
	}
	return data, nil
}

func (c *Cluster) save(ctx context.Context, s *allocator.Snapshot, profiles map[string]Profile, el elasticState) error {
	data, err := c.encode(s, profiles, el)
	if err != nil {
		return err
	}
	if err := c.st.PutState(ctx, StateName, data); err != nil {
		return fmt.Errorf("saving the simulated cluster: %w", err)
	}
	return nil
}
